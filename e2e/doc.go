// Package e2e drives hooksproxy with real, independently written OpenAI
// clients (openai-go v3, langchaingo's agent loop, npm openai on Node 20)
// against the scripted upstream, all in-process on loopback.
package e2e
