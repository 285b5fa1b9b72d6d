module github.com/hooksproxy/hooksproxy/e2e

go 1.26.8

replace github.com/hooksproxy/hooksproxy => ../

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/hooksproxy/hooksproxy v0.0.0-00010101000000-000000000000 // indirect
	github.com/openai/openai-go/v3 v3.99.0 // indirect
	github.com/tidwall/gjson v1.20.3 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	github.com/tidwall/sjson v1.2.9 // indirect
	github.com/tmc/langchaingo v0.1.14 // indirect
)
