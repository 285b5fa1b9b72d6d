// Package approvals provides the approval resolvers of hooksproxy: the
// built-in console queue (hooksproxy.console), its admin HTTP API and web
// page, and the webhook resolver (hooksproxy.webhook).
//
// A resolver sits behind the emitter's approval seam (AGENT-HOOKS-0.1 §9).
// The emitter applies the approval redactor, computes the request's
// context_identity over the redacted bytes, bounds the consultation with
// the declaration's timeouts.approval_resolver_ms and runs the normative
// validation order on whatever a resolver returns. The resolvers here
// therefore show exactly what they are given, echo the identity the
// approver saw, and report failures as errors (which the emitter turns into
// host_error:approval_resolver_failed).
//
// # Console
//
//	resolvers:
//	  approvers: {kind: hooksproxy.console, config: {timeout: 10m, max_pending: 1000}}
//
// Each consultation queues a pending approval and waits for a person. The
// wait ends at the first of: a decision; the config's timeout or the
// emitter's approval_resolver_ms (both a resolver timeout, §9:
// host_error:approval_resolver_failed; the bound defaults to 5 s, so raise
// it for a person to have time); the client going away. An
// approval that stops waiting leaves the queue at once. A full queue fails
// the consultation immediately.
//
// A decision is bound to one approval by its id; one that also echoes the
// context_identity shown with the approval (the page does) must match it,
// so it is bound to the bytes the approver saw. Approve lifts the deny with
// {"decision":"allow"}, reject keeps it with the original reason (or
// approval_rejected when it had none or had a host_error:* reason). A
// replayed, late or mis-bound decision is refused.
//
// HTTP (every API call needs Authorization: Bearer $HOOKSPROXY_ADMIN_TOKEN;
// no token configured means 403 for every API call):
//
//	GET  /agent-hooks/v1/approvals[?limit=100]  {"approvals":[{id, created, interception_point, reason, message, context_identity, context}]}
//	POST /agent-hooks/v1/approvals/{id}         {"outcome":"approve"|"reject", "context_identity"?: <as shown>, "note"?: "..."}
//	                                            200 {id, outcome}; 400 bad body; 404 unknown id;
//	                                            409 approval_identity_mismatch | approval_already_decided | approval_expired
//	GET  /agent-hooks/ui/                       the approval page (no data; asks for the token)
//
// # Webhook
//
//	resolvers:
//	  remote: {kind: hooksproxy.webhook, config: {url: https://approver.internal/hook, timeout: 2m,
//	           headers_from_env: {Authorization: APPROVER_AUTH}}}
//
// The resolver POSTs {context_identity, interception_point, verdict,
// context} and reads {outcome, context_identity, verdict?} back, passing it
// to the emitter as received.
package approvals
