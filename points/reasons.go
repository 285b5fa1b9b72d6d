package points

// Reason is a verdict reason. Interceptors choose their own; the host_error:*
// family is reserved for the host (AGENT-HOOKS-0.1 §11, spec/reserved-reasons.json).
type Reason = string

// HostErrorPrefix starts every reserved, host-synthesized reason.
const HostErrorPrefix = "host_error:"

// The reserved reasons of AGENT-HOOKS-0.1 §11, in the order of
// spec/reserved-reasons.json.
const (
	ReasonContextInvalid           Reason = "host_error:context_invalid"
	ReasonInterceptorFailed        Reason = "host_error:interceptor_failed"
	ReasonInterceptorTimeout       Reason = "host_error:interceptor_timeout"
	ReasonVerdictInvalid           Reason = "host_error:verdict_invalid"
	ReasonTransformInvalid         Reason = "host_error:transform_invalid"
	ReasonTransformTargetForbidden Reason = "host_error:transform_target_forbidden"
	ReasonTransformConflict        Reason = "host_error:transform_conflict"
	ReasonCompositionDisagreement  Reason = "host_error:composition_disagreement"
	ReasonApprovalResolverFailed   Reason = "host_error:approval_resolver_failed"
	ReasonApprovalUnresolved       Reason = "host_error:approval_unresolved"
	ReasonApprovalIdentityMismatch Reason = "host_error:approval_identity_mismatch"
	ReasonAdapterUnsupported       Reason = "host_error:adapter_unsupported"
	ReasonNoInterceptor            Reason = "host_error:no_interceptor"
	ReasonStreamingUnsupported     Reason = "host_error:streaming_unsupported"
)

// ReservedReasons lists every reserved reason, in spec order.
var ReservedReasons = [...]Reason{
	ReasonContextInvalid, ReasonInterceptorFailed, ReasonInterceptorTimeout,
	ReasonVerdictInvalid, ReasonTransformInvalid, ReasonTransformTargetForbidden,
	ReasonTransformConflict, ReasonCompositionDisagreement, ReasonApprovalResolverFailed,
	ReasonApprovalUnresolved, ReasonApprovalIdentityMismatch, ReasonAdapterUnsupported,
	ReasonNoInterceptor, ReasonStreamingUnsupported,
}

// IsHostError reports whether r is in the reserved host_error: namespace.
func IsHostError(r string) bool {
	return len(r) >= len(HostErrorPrefix) && r[:len(HostErrorPrefix)] == HostErrorPrefix
}
