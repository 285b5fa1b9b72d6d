// Package config loads hooksproxy's configuration: the YAML config file and
// the AGENT-HOOKS host declaration document (agent-hooks-declaration/1.0)
// that its hooks block holds.
//
// # Host declarations
//
// LoadDeclaration and LoadDeclarationFile run the spec's pipeline (§7.7.6)
// and refuse a document with exactly one *DeclarationError class, the first
// failing step: unreadable, malformed, version_unsupported,
// spec_unsupported, unknown_field, invalid_field, inconsistent,
// surface_unsupported, reference_unresolved, kind_unknown,
// binding_rejected. After reference_unresolved or kind_unknown the later
// independent steps still run, and what they find is in
// DeclarationError.Later (the class stays the first), so Parse lists it
// too. A loaded *Declaration is sealed: every default filled,
// every binding resolved to a points.Interceptor through a Registry, and
// Canonical returns the RFC 8785 form of the resolved document.
//
// # Config file
//
// YAML (JSON is valid YAML), strict: an unknown key, a wrong type or a
// duplicate key is a problem at every level, and Parse reports every problem
// at once as *Problems ("file:line: path: message"), every refused binding
// and every problem its kind found included. Secrets are named by
// environment variable (*_env keys) and never written inline; with a
// Registry that implements Environment, an unset upstream.api_key_env is a
// problem too. Keys, with defaults:
//
//	listen: 127.0.0.1:8080           host:port
//	upstream:
//	  base_url: (required)            http(s) URL, no credentials, query or fragment
//	  api_key_env: ""                 env var replacing the client's Authorization
//	  timeout: 10m                    Go duration
//	agent:
//	  id: (required)
//	  framework: openai-compatible    ^[a-z0-9_-]+$
//	  allow_header_override: false
//	sessions:
//	  header: X-Agent-Hooks-Session   not a credential header (Authorization,
//	                                  Cookie, X-Api-Key, ...)
//	  idle_timeout: 15m
//	  max_sessions: 10000
//	limits:                           sizes: 1048576, 512KiB, 8MiB, 1GiB, 10KB, 2MB
//	  max_request_bytes: 8MiB
//	  max_buffered_response_bytes: 32MiB
//	  max_total_buffered_bytes: 512MiB answers held across all requests at once, at least
//	                                  max_buffered_response_bytes; past it 503
//	                                  host_error:streaming_unsupported (Retry-After: 1,
//	                                  X-Should-Retry: true)
//	  max_context_bytes: (unset)      one serialized context; unset: twice the larger
//	                                  of max_request_bytes and max_buffered_response_bytes
//	                                  plus 1MiB, at least 5MiB
//	passthrough: []                   exact paths, or a prefix ending in *, which
//	                                  covers whole segments (/v1/files* is /v1/files
//	                                  and /v1/files/..., not /v1/filesystem); none may
//	                                  cover /v1/chat/completions, /v1/responses,
//	                                  /v1/messages, /agent-hooks, /healthz, /readyz,
//	                                  nor a chat API under another root (an entry
//	                                  ending in /chat/completions, /responses or
//	                                  /v1/messages); a POST a prefix entry would pass
//	                                  to such a path is refused (404)
//	records:
//	  file: ""                        JSONL path (relative: from the working
//	                                  directory); absent writes no file
//	  fsync: false
//	  max_bytes: 0                    rotate at this size; 0 never rotates
//	  max_backups: 0                  rotated files kept; 0 keeps all
//	  host_members: false             true adds request_id and http_request_id
//	metrics: {path: /metrics}         not /healthz, /readyz, /v1/..., /agent-hooks/...
//	                                  nor a path a passthrough entry covers
//	admin: {token_env: HOOKSPROXY_ADMIN_TOKEN}
//	tool_seam: {transparent: true, max_auto_turns: 8}
//	resolvers:          {<name>: {kind: <kind>, config: {...}}}
//	redactors:          {<name>: {kind: <kind>, config: {...}}}
//	identity_providers: {<name>: {kind: <kind>, config: {...}}}
//	hooks: (required)                 a host declaration written in YAML, or the
//	                                  path of a declaration JSON file
//
// The hooks block follows the declaration rules exactly (its findings are
// reported at their config path and line); binding and component config
// blobs are handed to their kind as JSON and validated there, except that a
// top-level key naming an inline secret (api_key, token, key, ...) is
// refused here. A kind's errors that implement MemberError are reported at
// the line of the member they name. Config.Line locates any path for
// checks made after loading.
package config
