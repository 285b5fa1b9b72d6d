package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/hooksproxy/hooksproxy/points"
)

// IdentityJCSSHA256 is the spec's default identity provider name (§10.2).
const IdentityJCSSHA256 = "jcs-sha256"

// Fixed loader bounds (§7.7.6).
const (
	maxBindings  = 256
	maxIDLen     = 64
	maxTimeoutMS = 3_600_000
	// defaultInterceptorMS is the §7 RECOMMENDED interceptor bound.
	defaultInterceptorMS = 5000
)

// knobOf returns the value of one knob of c.
func knobOf(c points.Composition, k string) string {
	switch k {
	case KnobOnApproval:
		return c.OnApproval
	case KnobOnDisagreement:
		return c.OnDisagreement
	}
	return c.OnTransformConflict
}

func setKnob(c *points.Composition, k, v string) {
	switch k {
	case KnobOnApproval:
		c.OnApproval = v
	case KnobOnDisagreement:
		c.OnDisagreement = v
	default:
		c.OnTransformConflict = v
	}
}

// Timeouts are the resolved §7 and §9 bounds; Unbounded where the document
// wrote null.
type Timeouts struct {
	Interceptor      time.Duration
	ApprovalResolver time.Duration
}

// Declaration is a loaded, sealed host declaration: every default filled
// (§7.7.3), checked against the host surface and the registry, and every
// binding resolved to an interceptor. It is read-only and safe to share.
type Declaration struct {
	version       string
	spec          string
	id            string
	hostName      string
	hostVersion   string
	hasHost       bool
	mode          points.Mode
	composition   points.Composition
	identity      *string
	resolverRef   *string
	redactorRef   *string
	posture       string
	interceptorMS *uint64
	approvalMS    *uint64
	approvalSet   bool // approval_resolver_ms was written (else it is interceptor_ms)
	maxBuffered   *uint64
	surface       Surface
	specs         []BindingSpec
	configs       []*jval
	bindings      []points.Binding
	// advice are warnings about bindings that load but cannot work as
	// written (PointsAdvisor), at their JSON pointers.
	advice     []Finding
	extensions *jval

	identityProvider points.IdentityProvider
	resolver         points.Resolver
	redactor         points.Redactor

	canonical []byte
}

// Advice lists warnings about bindings that loaded but judge nothing at
// the points they are bound to (PointsAdvisor), each at its binding's
// JSON pointer ("/bindings/2/at").
func (d *Declaration) Advice() []Finding { return slices.Clone(d.advice) }

// PointsAdvisor is implemented by interceptors that judge only some points:
// AdvisePoints says, for the points a binding names (nil: every point),
// why it would judge nothing there, or "" when it judges something.
// validate prints it as a warning; the binding still loads.
type PointsAdvisor interface {
	AdvisePoints(at []points.Point) string
}

// Version is the document's contract version ("agent-hooks-declaration/1.0");
// records stamp it.
func (d *Declaration) Version() string { return d.version }

// Spec is the wire version the document was written for (default agent-hooks/0.1).
func (d *Declaration) Spec() string { return d.spec }

// ID is the operator label, "" when absent. Never stamped on records.
func (d *Declaration) ID() string { return d.id }

// Host returns the informative host block; ok is false when absent.
func (d *Declaration) Host() (name, version string, ok bool) {
	return d.hostName, d.hostVersion, d.hasHost
}

// Mode is the enforcement mode (§8).
func (d *Declaration) Mode() points.Mode { return d.mode }

// Composition is the resolved profile and knobs, as records stamp them.
func (d *Declaration) Composition() points.Composition { return d.composition }

// IdentityProvider is the declared identity provider name: "jcs-sha256" (the
// default), a custom provider's name, or "" for identity-unbound (null).
func (d *Declaration) IdentityProvider() string {
	if d.identity == nil {
		return ""
	}
	return *d.identity
}

// IdentityUnbound reports whether the document wrote identity_provider: null.
func (d *Declaration) IdentityUnbound() bool { return d.identity == nil }

// CustomIdentityProvider is the registered provider a custom name resolved
// to; nil for jcs-sha256 and for identity-unbound.
func (d *Declaration) CustomIdentityProvider() points.IdentityProvider { return d.identityProvider }

// ApprovalResolverRef is the approval resolver's reference name, "" for none.
func (d *Declaration) ApprovalResolverRef() string { return deref(d.resolverRef) }

// ApprovalRedactorRef is the approval redactor's reference name, "" for none.
func (d *Declaration) ApprovalRedactorRef() string { return deref(d.redactorRef) }

// ApprovalResolver is the registered resolver, nil when none is declared
// (liftable denies then stay denies).
func (d *Declaration) ApprovalResolver() points.Resolver { return d.resolver }

// ApprovalRedactor is the registered redactor, nil when none is declared.
func (d *Declaration) ApprovalRedactor() points.Redactor { return d.redactor }

// Posture is the tool_seam_host_error posture: "continue" or "terminate".
func (d *Declaration) Posture() string { return d.posture }

// Timeouts are the resolved interceptor and approval resolver bounds.
func (d *Declaration) Timeouts() Timeouts {
	return Timeouts{Interceptor: msDuration(d.interceptorMS), ApprovalResolver: msDuration(d.approvalMS)}
}

// ApprovalResolverTimeoutStated reports whether the document wrote
// timeouts.approval_resolver_ms; when it did not, the bound is
// interceptor_ms, the schema's default.
func (d *Declaration) ApprovalResolverTimeoutStated() bool { return d.approvalSet }

// RecordsMaxBuffered is the in-memory record buffer bound; 0 is unbounded (null).
func (d *Declaration) RecordsMaxBuffered() int {
	if d.maxBuffered == nil {
		return 0
	}
	if *d.maxBuffered > uint64(maxInt) {
		return maxInt
	}
	return int(*d.maxBuffered)
}

const maxInt = int(^uint(0) >> 1)

// maxRecordQueue is the largest records.max_buffered hooksproxy honours:
// the record file's queue is allocated whole, so a larger bound would cost
// its memory up front.
const maxRecordQueue = 1 << 20

// Surface is the resolved declared surface.
func (d *Declaration) Surface() Surface { return d.surface.clone() }

// BindingSpecs are the resolved bindings in dispatch order.
func (d *Declaration) BindingSpecs() []BindingSpec {
	out := make([]BindingSpec, len(d.specs))
	for i, s := range d.specs {
		s.Config = slices.Clone(s.Config)
		s.At = slices.Clone(s.At)
		out[i] = s
	}
	return out
}

// Bindings are the registered interceptors in dispatch order (array order):
// Name is the binding id, At its resolved points, Timeout its bound
// (Unbounded, a negative duration, where the document wrote null).
func (d *Declaration) Bindings() []points.Binding {
	out := make([]points.Binding, len(d.bindings))
	for i, b := range d.bindings {
		b.At = slices.Clone(b.At)
		out[i] = b
	}
	return out
}

// Extensions are the document's extensions, verbatim ({} when absent).
func (d *Declaration) Extensions() json.RawMessage { return appendJSON(nil, d.extensions) }

// Canonical is the RFC 8785 canonical JSON of the resolved declaration
// (§7.7.3 "Resolved form"): the equivalence oracle of the load paths.
func (d *Declaration) Canonical() []byte { return slices.Clone(d.canonical) }

// EmitterConfig translates the declaration into a points.Config: mode,
// composition, identity provider (jcs-sha256, the registered custom one, or
// nil for identity-unbound), bindings, approval resolver and redactor,
// timeouts (Unbounded, negative, where the document wrote null) and the
// contract version records stamp. The caller adds the sink, observer,
// clock and context bounds.
func (d *Declaration) EmitterConfig() points.Config {
	cfg := points.Config{
		Mode:               d.mode,
		Composition:        d.composition,
		Bindings:           d.Bindings(),
		Resolver:           d.resolver,
		Redactor:           d.redactor,
		InterceptorTimeout: msDuration(d.interceptorMS),
		ResolverTimeout:    msDuration(d.approvalMS),
		Declaration:        d.version,
	}
	switch {
	case d.identity == nil:
	case *d.identity == IdentityJCSSHA256:
		cfg.Identity = points.JCSSHA256()
	default:
		cfg.Identity = d.identityProvider
	}
	return cfg
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func msDuration(ms *uint64) time.Duration {
	if ms == nil {
		return Unbounded
	}
	return time.Duration(*ms) * time.Millisecond
}

// LoadDeclarationFile runs step 1 (a regular file of at most 1 MiB, strict
// UTF-8 without a byte-order mark) and then LoadDeclaration.
func LoadDeclarationFile(path string, reg Registry) (*Declaration, error) {
	return LoadDeclarationFileFor(path, reg, DefaultSurface())
}

// LoadDeclarationFileFor is LoadDeclarationFile against a given host surface.
func LoadDeclarationFileFor(path string, reg Registry, host HostSurface) (*Declaration, error) {
	doc, err := readDeclarationFile(path)
	if err != nil {
		return nil, err
	}
	return LoadDeclarationFor(doc, reg, host)
}

func readDeclarationFile(path string) ([]byte, error) {
	unreadable := func(detail string, err error) error {
		e := declErr(ClassUnreadable, "", detail)
		e.Err = err
		return e
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, unreadable("cannot stat the document", err)
	}
	if !st.Mode().IsRegular() {
		return nil, unreadable("not a regular file", nil)
	}
	if st.Size() > maxDocumentBytes {
		return nil, unreadable(fmt.Sprintf("document is %d bytes; the bound is %d", st.Size(), maxDocumentBytes), nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable("cannot open the document", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	// Read at most one byte past the bound: the file may grow after Stat.
	if _, err := buf.ReadFrom(io.LimitReader(f, maxDocumentBytes+1)); err != nil {
		return nil, unreadable("cannot read the document", err)
	}
	if buf.Len() > maxDocumentBytes {
		return nil, unreadable(fmt.Sprintf("document exceeds %d bytes", maxDocumentBytes), nil)
	}
	return buf.Bytes(), nil
}

// LoadDeclaration runs the §7.7.6 pipeline over one JSON document against
// hooksproxy's own surface (DefaultSurface) and returns the sealed
// declaration, or a *DeclarationError for the first failing step. Steps:
// malformed (2), version_unsupported (3), spec_unsupported (4),
// unknown_field (5), invalid_field (6), inconsistent (7),
// surface_unsupported (8), reference_unresolved (9), kind_unknown (10),
// binding_rejected (11). A byte-order mark or invalid UTF-8 is unreadable (1).
func LoadDeclaration(doc []byte, reg Registry) (*Declaration, error) {
	return LoadDeclarationFor(doc, reg, DefaultSurface())
}

// LoadDeclarationFor is LoadDeclaration against a given host surface (the
// conformance kit and the golden fixtures use their own).
func LoadDeclarationFor(doc []byte, reg Registry, host HostSurface) (*Declaration, error) {
	if bytes.HasPrefix(doc, []byte{0xEF, 0xBB, 0xBF}) {
		return nil, declErr(ClassUnreadable, "", "document starts with a byte-order mark")
	}
	if !utf8.Valid(doc) {
		return nil, declErr(ClassUnreadable, "", "document is not valid UTF-8")
	}
	root, err := parseChecked(doc) // 2
	if err != nil {
		return nil, declErr(ClassMalformed, "", err.Error())
	}
	if root.k != jObj {
		return nil, declErr(ClassMalformed, "", "document root is not a JSON object")
	}
	if err := checkVersion(root); err != nil { // 3
		return nil, err
	}
	if err := checkSpec(root); err != nil { // 4
		return nil, err
	}
	if err := checkUnknownFields(root); err != nil { // 5
		return nil, err
	}
	if err := checkFields(root); err != nil { // 6
		return nil, err
	}
	if err := checkConsistency(root, nil); err != nil { // 7, members as stated
		return nil, err
	}
	if err := host.Validate(); err != nil {
		return nil, err
	}
	if err := checkConsistency(root, &host); err != nil { // 7, surface filled
		return nil, err
	}
	d := fill(root, &host)
	if err := checkSurface(root, d, &host); err != nil { // 8
		return nil, err
	}
	if reg == nil {
		reg = NewRegistry()
	}
	refErr, kindErr := resolveReferences(d, reg), checkKinds(d, reg) // 9, 10
	if refErr != nil || kindErr != nil {
		// Steps 9, 10 and 11 look at independent members, so the refusal
		// (the first failing step's class, as §7.7.6 requires) also
		// carries what the later ones find, for a validator to list.
		first, later := refErr, []*DeclarationError(nil)
		if first == nil {
			first = kindErr
		} else if kindErr != nil {
			later = append(later, kindErr.(*DeclarationError))
		}
		if be := buildBindings(d, reg, true); be != nil {
			later = append(later, be.(*DeclarationError))
		}
		fe := first.(*DeclarationError)
		fe.Later = later
		return nil, fe
	}
	if err := buildBindings(d, reg, false); err != nil { // 11
		return nil, err
	}
	canon, err := jcs.Transform(appendJSON(nil, d.resolvedForm()))
	if err != nil {
		return nil, declErr(ClassMalformed, "", "cannot canonicalize the resolved form: "+err.Error())
	}
	d.canonical = canon
	return d, nil
}

// ---- steps 3 and 4 ----------------------------------------------------------

func versionErr(detail string) *DeclarationError {
	e := declErr(ClassVersionUnsupported, "/declaration",
		detail+"; accepted: "+strings.Join(supportedDeclarationVersions, ", "))
	e.Accepted = SupportedDeclarationVersions()
	return e
}

func checkVersion(doc *jval) error {
	v := doc.get("declaration")
	if v == nil {
		return versionErr("declaration is missing")
	}
	s, ok := v.str()
	if !ok {
		return versionErr("declaration is not a string")
	}
	if !slices.Contains(supportedDeclarationVersions, s) {
		return versionErr(fmt.Sprintf("declaration %q is not accepted by this loader", truncate(s, 80)))
	}
	return nil
}

// parseMajorMinor parses "<prefix><major>.<minor>" with digit-only parts.
func parseMajorMinor(s, prefix string) (uint64, uint64, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, 0, false
	}
	maj, min, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, 0, false
	}
	a, okA := digits(maj)
	b, okB := digits(min)
	return a, b, okA && okB
}

func digits(s string) (uint64, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n, ok := uintLiteral(s)
	return n, ok
}

func checkSpec(doc *jval) error {
	v := doc.get("spec")
	if v == nil {
		return nil
	}
	s, ok := v.str()
	if !ok {
		return declErr(ClassSpecUnsupported, "/spec", "spec is not a string")
	}
	maj, min, ok := parseMajorMinor(s, "agent-hooks/")
	if !ok {
		return declErr(ClassSpecUnsupported, "/spec", fmt.Sprintf("spec %q is not of the form agent-hooks/<major>.<minor>", truncate(s, 80)))
	}
	lmaj, lmin, _ := parseMajorMinor(points.SpecVersion, "agent-hooks/")
	if maj != lmaj || min > lmin {
		return declErr(ClassSpecUnsupported, "/spec", fmt.Sprintf("spec %q is not supported by this loader (it implements %s)", s, points.SpecVersion))
	}
	return nil
}

// ---- step 5 -----------------------------------------------------------------

var (
	rootKeys          = []string{"$schema", "declaration", "spec", "id", "host", "configuration", "surface", "bindings", "extensions"}
	hostKeys          = []string{"name", "version"}
	configurationKeys = []string{"mode", "composition", "identity_provider", "approval", "posture", "timeouts", "records"}
	compositionKeys   = []string{"profile", KnobOnApproval, KnobOnDisagreement, KnobOnTransformConflict}
	approvalKeys      = []string{"resolver", "redactor"}
	postureKeys       = []string{"tool_seam_host_error"}
	timeoutKeys       = []string{"interceptor_ms", "approval_resolver_ms"}
	recordKeys        = []string{"max_buffered"}
	surfaceKeys       = []string{"interception_points", "capabilities", "profiles", "buffered_output", "exposure_bound", "declaration_versions"}
	bindingKeys       = []string{"id", "kind", "config", "at", "timeout_ms"}
)

func unknownIn(obj *jval, allowed []string, at string, out *[]Finding) {
	if obj == nil || obj.k != jObj {
		return
	}
	for _, m := range obj.obj {
		if !slices.Contains(allowed, m.key) {
			*out = append(*out, Finding{Path: ptr(at, m.key), Detail: fmt.Sprintf("unknown member %q", truncate(m.key, 64))})
		}
	}
}

func checkUnknownFields(doc *jval) error {
	var f []Finding
	unknownIn(doc, rootKeys, "", &f)
	unknownIn(doc.get("host"), hostKeys, "/host", &f)
	if cfg := doc.get("configuration").object(); cfg != nil {
		unknownIn(cfg, configurationKeys, "/configuration", &f)
		unknownIn(cfg.get("composition"), compositionKeys, "/configuration/composition", &f)
		unknownIn(cfg.get("approval"), approvalKeys, "/configuration/approval", &f)
		unknownIn(cfg.get("posture"), postureKeys, "/configuration/posture", &f)
		unknownIn(cfg.get("timeouts"), timeoutKeys, "/configuration/timeouts", &f)
		unknownIn(cfg.get("records"), recordKeys, "/configuration/records", &f)
	}
	if s := doc.get("surface").object(); s != nil {
		unknownIn(s, surfaceKeys, "/surface", &f)
		if profiles := s.get("profiles").object(); profiles != nil {
			for _, m := range profiles.obj {
				p := ptr("/surface/profiles", m.key)
				if !isProfile(m.key) {
					f = append(f, Finding{Path: p, Detail: fmt.Sprintf("unknown profile %q", truncate(m.key, 64))})
					continue
				}
				unknownIn(m.val, consultedKnobs(m.key), p, &f)
			}
		}
	}
	if b := doc.get("bindings"); b != nil && b.k == jArr {
		for i, item := range b.arr {
			unknownIn(item, bindingKeys, "/bindings/"+strconv.Itoa(i), &f)
		}
	}
	if len(f) > 0 {
		return newDeclError(ClassUnknownField, f)
	}
	return nil
}

// ---- step 6 -----------------------------------------------------------------

var (
	docIDRE        = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	hostNameRE     = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	extensionKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

type fieldCheck struct{ out []Finding }

func (c *fieldCheck) bad(p, format string, args ...any) {
	c.out = append(c.out, Finding{Path: p, Detail: fmt.Sprintf(format, args...)})
}

func (c *fieldCheck) str(v *jval, p string) (string, bool) {
	if v == nil {
		return "", false
	}
	if v.k != jStr {
		c.bad(p, "must be a string")
		return "", false
	}
	return v.s, true
}

func (c *fieldCheck) obj(v *jval, p string) *jval {
	if v == nil {
		return nil
	}
	if v.k != jObj {
		c.bad(p, "must be an object")
		return nil
	}
	return v
}

func (c *fieldCheck) arr(v *jval, p string) *jval {
	if v == nil {
		return nil
	}
	if v.k != jArr {
		c.bad(p, "must be an array")
		return nil
	}
	return v
}

func (c *fieldCheck) enum(v *jval, p string, allowed []string) {
	if s, ok := c.str(v, p); ok && !slices.Contains(allowed, s) {
		c.bad(p, "%q is not one of %s", truncate(s, 64), strings.Join(allowed, ", "))
	}
}

// intOrNull checks an integer in lo..hi, or null. §7.7.3: integers are
// written without a fraction or an exponent (5000, not 5000.0 or 5e3), and
// the loader refuses the other forms even where a schema validator would
// take them.
func (c *fieldCheck) intOrNull(v *jval, p string, lo, hi uint64) {
	if v == nil || v.k == jNull {
		return
	}
	if v.k == jNum {
		if n, ok := uintLiteral(v.s); ok && n >= lo && n <= hi {
			return
		}
		if strings.ContainsAny(v.s, ".eE") {
			c.bad(p, "must be written as an integer, without a fraction or an exponent (%d to %d), or null", lo, hi)
			return
		}
	}
	c.bad(p, "must be an integer from %d to %d, or null", lo, hi)
}

// stringSet checks an array of distinct strings from allowed (any string
// when allowed is nil) with at least min items.
func (c *fieldCheck) stringSet(v *jval, p string, allowed []string, min int) {
	a := c.arr(v, p)
	if a == nil {
		return
	}
	seen := map[string]bool{}
	for i, item := range a.arr {
		ip := p + "/" + strconv.Itoa(i)
		switch {
		case item.k != jStr:
			c.bad(ip, "must be a string")
		case allowed != nil && !slices.Contains(allowed, item.s):
			c.bad(ip, "%q is not one of %s", truncate(item.s, 64), strings.Join(allowed, ", "))
		case seen[item.s]:
			c.bad(ip, "%q is listed twice; the member is a set", truncate(item.s, 64))
		default:
			seen[item.s] = true
		}
	}
	if len(a.arr) < min {
		c.bad(p, "must list at least %d item(s)", min)
	}
}

func pointNames() []string {
	all := points.AllPoints()
	out := make([]string, len(all))
	for i, p := range all {
		out[i] = string(p)
	}
	return out
}

func checkFields(doc *jval) error {
	c := &fieldCheck{}
	c.str(doc.get("$schema"), "/$schema")
	if id, ok := c.str(doc.get("id"), "/id"); ok && !docIDRE.MatchString(id) {
		c.bad("/id", "must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	if host := c.obj(doc.get("host"), "/host"); host != nil {
		if host.get("name") == nil {
			c.bad("/host/name", "required when host is present")
		} else if n, ok := c.str(host.get("name"), "/host/name"); ok && !hostNameRE.MatchString(n) {
			c.bad("/host/name", "must match ^[a-z0-9_-]{1,64}$")
		}
		if v, ok := c.str(host.get("version"), "/host/version"); ok {
			if n := utf8.RuneCountInString(v); n == 0 || n > 64 {
				c.bad("/host/version", "must be 1 to 64 characters")
			}
		}
	}
	if cfg := c.obj(doc.get("configuration"), "/configuration"); cfg != nil {
		c.enum(cfg.get("mode"), "/configuration/mode", []string{string(points.Enforce), string(points.EvaluateOnly)})
		if comp := c.obj(cfg.get("composition"), "/configuration/composition"); comp != nil {
			c.enum(comp.get("profile"), "/configuration/composition/profile", profileOrder)
			for _, k := range knobOrder {
				c.enum(comp.get(k), ptr("/configuration/composition", k), knobValues(k))
			}
		}
		if ip := cfg.get("identity_provider"); ip != nil && ip.k != jNull {
			if ip.k != jStr {
				c.bad("/configuration/identity_provider", "must be a string or null")
			} else if ip.s != IdentityJCSSHA256 && !validProviderName(ip.s) {
				c.bad("/configuration/identity_provider", "custom provider names must match ^[a-z][a-z0-9_-]{0,63}$ and not begin with jcs (see spec §10.1)")
			}
		}
		if a := c.obj(cfg.get("approval"), "/configuration/approval"); a != nil {
			for _, k := range approvalKeys {
				p := ptr("/configuration/approval", k)
				v := a.get(k)
				switch {
				case v == nil || v.k == jNull:
				case v.k != jStr:
					c.bad(p, "must be a string or null")
				case !validReference(v.s):
					c.bad(p, "must match ^[a-z][a-z0-9_-]{0,63}$")
				}
			}
		}
		if p := c.obj(cfg.get("posture"), "/configuration/posture"); p != nil {
			c.enum(p.get("tool_seam_host_error"), "/configuration/posture/tool_seam_host_error", []string{PostureContinue, PostureTerminate})
		}
		if t := c.obj(cfg.get("timeouts"), "/configuration/timeouts"); t != nil {
			for _, k := range timeoutKeys {
				c.intOrNull(t.get(k), ptr("/configuration/timeouts", k), 1, maxTimeoutMS)
			}
		}
		if r := c.obj(cfg.get("records"), "/configuration/records"); r != nil {
			c.intOrNull(r.get("max_buffered"), "/configuration/records/max_buffered", 1, ^uint64(0))
		}
	}
	if s := c.obj(doc.get("surface"), "/surface"); s != nil {
		c.stringSet(s.get("interception_points"), "/surface/interception_points", pointNames(), 4)
		c.stringSet(s.get("capabilities"), "/surface/capabilities", capabilityVocabulary, 0)
		if profiles := c.obj(s.get("profiles"), "/surface/profiles"); profiles != nil {
			for _, m := range profiles.obj {
				p := ptr("/surface/profiles", m.key)
				knobs := c.obj(m.val, p)
				if knobs == nil || !isProfile(m.key) {
					continue
				}
				for _, k := range consultedKnobs(m.key) {
					if v := knobs.get(k); v != nil {
						c.stringSet(v, ptr(p, k), knobValues(k), 1)
					}
				}
			}
		}
		buffered := true
		if b := s.get("buffered_output"); b != nil {
			if b.k != jBool {
				c.bad("/surface/buffered_output", "must be a boolean")
			} else {
				buffered = b.b
			}
		}
		hasBound := s.get("exposure_bound") != nil
		if b, ok := c.str(s.get("exposure_bound"), "/surface/exposure_bound"); ok {
			if n := utf8.RuneCountInString(b); n == 0 || n > maxDetailLen {
				c.bad("/surface/exposure_bound", "must be 1 to %d characters", maxDetailLen)
			}
		}
		if hasBound && buffered {
			c.bad("/surface/exposure_bound", "permitted only when buffered_output is false")
		}
		if !hasBound && !buffered {
			c.bad("/surface/exposure_bound", "required when buffered_output is false (see spec §12.1a)")
		}
		if a := c.arr(s.get("declaration_versions"), "/surface/declaration_versions"); a != nil {
			seen := map[string]bool{}
			for i, v := range a.arr {
				p := "/surface/declaration_versions/" + strconv.Itoa(i)
				switch _, _, ok := parseMajorMinor(v.s, "agent-hooks-declaration/"); {
				case v.k != jStr:
					c.bad(p, "must be a string")
				case !ok:
					c.bad(p, `must match ^agent-hooks-declaration/[0-9]+\.[0-9]+$`)
				case seen[v.s]:
					c.bad(p, "%q is listed twice; the member is a set", v.s)
				default:
					seen[v.s] = true
				}
			}
			if len(a.arr) == 0 {
				c.bad("/surface/declaration_versions", "must list at least one version")
			}
		}
	}
	switch b := doc.get("bindings"); {
	case b == nil:
		c.bad("/bindings", "required")
	case b.k != jArr:
		c.bad("/bindings", "must be an array")
	default:
		if len(b.arr) > maxBindings {
			c.bad("/bindings", "must list at most %d bindings", maxBindings)
		}
		for i, item := range b.arr {
			bp := "/bindings/" + strconv.Itoa(i)
			obj := c.obj(item, bp)
			if obj == nil {
				continue
			}
			if obj.get("id") == nil {
				c.bad(bp+"/id", "required")
			} else if id, ok := c.str(obj.get("id"), bp+"/id"); ok && !validReference(id) {
				c.bad(bp+"/id", "must match ^[a-z][a-z0-9_-]{0,63}$")
			}
			if obj.get("kind") == nil {
				c.bad(bp+"/kind", "required")
			} else if k, ok := c.str(obj.get("kind"), bp+"/kind"); ok && !validKind(k) {
				c.bad(bp+"/kind", `must match ^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)+$ with at most %d characters`, maxKindLen)
			}
			if at := obj.get("at"); at != nil {
				c.stringSet(at, bp+"/at", pointNames(), 1)
			}
			c.intOrNull(obj.get("timeout_ms"), bp+"/timeout_ms", 1, maxTimeoutMS)
		}
	}
	if ext := c.obj(doc.get("extensions"), "/extensions"); ext != nil {
		for _, m := range ext.obj {
			if !extensionKeyRE.MatchString(m.key) {
				c.bad(ptr("/extensions", m.key), "extension keys must match ^[a-z][a-z0-9_]*$ (see spec §4.6)")
			}
		}
	}
	if len(c.out) > 0 {
		return newDeclError(ClassInvalidField, c.out)
	}
	return nil
}

// ---- resolution helpers -----------------------------------------------------

// statedComposition is the document's composition before knob defaults.
func statedComposition(doc *jval) points.Composition {
	comp := doc.get("configuration").get("composition")
	c := points.Composition{Profile: ProfileFirstDeny}
	if p, ok := comp.get("profile").str(); ok {
		c.Profile = p
	}
	for _, k := range knobOrder {
		if v, ok := comp.get(k).str(); ok {
			setKnob(&c, k, v)
		}
	}
	return c
}

// withKnobDefaults clears knobs the profile does not consult and fills the
// consulted ones left unset with their §7.2 default.
func withKnobDefaults(c points.Composition) points.Composition {
	out := points.Composition{Profile: c.Profile}
	for _, k := range consultedKnobs(c.Profile) {
		v := knobOf(c, k)
		if v == "" {
			v = knobDefault(k)
		}
		setKnob(&out, k, v)
	}
	return out
}

func pointsOf(ss []string) []points.Point {
	out := make([]points.Point, 0, len(ss))
	for _, s := range ss {
		if p, err := points.ParsePoint(s); err == nil {
			out = append(out, p)
		}
	}
	return lifecycleOrder(out)
}

// statedProfiles reads surface.profiles: each listed profile supports the
// knob values it lists, and only the §7.2 default for a knob it omits.
func statedProfiles(p *jval) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, m := range p.obj {
		if !isProfile(m.key) {
			continue
		}
		knobs := map[string][]string{}
		for _, k := range consultedKnobs(m.key) {
			if vs, ok := m.val.get(k).strs(); ok {
				knobs[k] = sortedSet(vs)
			} else {
				knobs[k] = []string{knobDefault(k)}
			}
		}
		out[m.key] = knobs
	}
	return out
}

// resolveSurface fills the surface from the document and, for members it
// does not state, from the host surface.
func resolveSurface(doc *jval, host *HostSurface) Surface {
	stated := doc.get("surface").object()
	if stated == nil {
		incremental := slices.Contains(host.Capabilities, "incremental_output")
		s := Surface{
			InterceptionPoints:  lifecycleOrder(host.Points),
			Capabilities:        sortedSet(host.Capabilities),
			Profiles:            cloneProfiles(host.Profiles),
			BufferedOutput:      !incremental,
			DeclarationVersions: sortedSet(host.DeclarationVersions),
		}
		if incremental {
			s.ExposureBound = host.ExposureBound
		}
		return s
	}
	s := Surface{BufferedOutput: true}
	if ps, ok := stated.get("interception_points").strs(); ok {
		s.InterceptionPoints = pointsOf(ps)
	} else {
		s.InterceptionPoints = lifecycleOrder(host.Points)
	}
	if cs, ok := stated.get("capabilities").strs(); ok {
		s.Capabilities = sortedSet(cs)
	} else {
		s.Capabilities = sortedSet(host.Capabilities)
	}
	if p := stated.get("profiles").object(); p != nil {
		s.Profiles = statedProfiles(p)
	} else {
		s.Profiles = cloneProfiles(host.Profiles)
	}
	if b := stated.get("buffered_output"); b != nil && b.k == jBool {
		s.BufferedOutput = b.b
	}
	if eb, ok := stated.get("exposure_bound").str(); ok {
		s.ExposureBound = eb
	}
	if vs, ok := stated.get("declaration_versions").strs(); ok {
		s.DeclarationVersions = sortedSet(vs)
	} else {
		s.DeclarationVersions = sortedSet(host.DeclarationVersions)
	}
	return s
}

// ---- step 7 -----------------------------------------------------------------

// checkConsistency runs step 7. With host nil only stated members are
// checked; with host set the surface is filled from it first.
func checkConsistency(doc *jval, host *HostSurface) error {
	var f []Finding
	stated := doc.get("surface").object()
	bad := func(p, detail string) {
		if member, ok := strings.CutPrefix(p, "/surface/"); ok && host != nil {
			member, _, _ = strings.Cut(member, "/")
			if stated.get(member) == nil {
				if stated != nil && (member == "buffered_output" || member == "exposure_bound") {
					detail += fmt.Sprintf(" (the document does not state /surface/%s; the default applies)", member)
				} else {
					detail += fmt.Sprintf(" (the document does not state /surface/%s; it was filled from the host surface)", member)
				}
			}
		}
		f = append(f, Finding{Path: p, Detail: detail})
	}

	var (
		pts      []points.Point
		havePts  bool
		caps     []string
		haveCaps bool
		versions []string
		haveVers bool
		buffered = true
	)
	if host != nil {
		s := resolveSurface(doc, host)
		pts, havePts = s.InterceptionPoints, true
		caps, haveCaps = s.Capabilities, true
		versions, haveVers = s.DeclarationVersions, true
		buffered = s.BufferedOutput
	} else if stated != nil {
		var ps []string
		if ps, havePts = stated.get("interception_points").strs(); havePts {
			pts = pointsOf(ps)
		}
		caps, haveCaps = stated.get("capabilities").strs()
		versions, haveVers = stated.get("declaration_versions").strs()
		if b := stated.get("buffered_output"); b != nil && b.k == jBool {
			buffered = b.b
		}
	}

	if havePts {
		has := pointSet(pts)
		for _, p := range floorPoints {
			if !has[p] {
				bad("/surface/interception_points", fmt.Sprintf("the §3.2 floor requires %s; omit only the model or tool points", p))
			}
		}
		if has[points.PreModelCall] != has[points.PostModelCall] {
			bad("/surface/interception_points", "pre_model_call and post_model_call are omitted together or not at all (see spec §3.2)")
		}
		if has[points.PreToolCall] != has[points.PostToolCall] {
			bad("/surface/interception_points", "pre_tool_call and post_tool_call are omitted together or not at all (see spec §3.2)")
		}
		if haveCaps {
			cs := stringSet(caps)
			if cs["model_calls"] != (has[points.PreModelCall] && has[points.PostModelCall]) {
				bad("/surface/capabilities", "model_calls is listed iff both model points are listed (see spec §3.2)")
			}
			if cs["tool_calls"] != (has[points.PreToolCall] && has[points.PostToolCall]) {
				bad("/surface/capabilities", "tool_calls is listed iff both tool points are listed (see spec §3.2)")
			}
		}
	}
	if haveCaps && slices.Contains(caps, "incremental_output") && buffered {
		bad("/surface/capabilities", "incremental_output requires buffered_output: false (see spec §12.1)")
	}

	// Knobs only under the profile that consults them: refused, never cleared.
	comp := statedComposition(doc)
	consulted := consultedKnobs(comp.Profile)
	compObj := doc.get("configuration").get("composition")
	for _, k := range knobOrder {
		if compObj.get(k) != nil && !slices.Contains(consulted, k) {
			bad(ptr("/configuration/composition", k), fmt.Sprintf("%s does not consult %s; the member is refused, not cleared", comp.Profile, k))
		}
	}
	// The configured composition within a stated surface.profiles; against
	// the host's profiles it is a step-8 check.
	resolved := withKnobDefaults(comp)
	if p := stated.get("profiles").object(); p != nil {
		profiles := statedProfiles(p)
		if support, ok := profiles[resolved.Profile]; !ok {
			bad("/configuration/composition/profile", fmt.Sprintf("%s is not in surface.profiles", resolved.Profile))
		} else {
			for _, k := range consultedKnobs(resolved.Profile) {
				if v := knobOf(resolved, k); !slices.Contains(support[k], v) {
					bad(ptr("/configuration/composition", k), fmt.Sprintf("%q is not in surface.profiles for %s", v, resolved.Profile))
				}
			}
		}
	}

	if own, ok := doc.get("declaration").str(); ok && haveVers && !slices.Contains(versions, own) {
		bad("/surface/declaration_versions", fmt.Sprintf("must include the document's own declaration %q", own))
	}

	// Bindings: unique ids, `at` within the surface.
	ids := map[string]bool{}
	if b := doc.get("bindings"); b != nil && b.k == jArr {
		has := pointSet(pts)
		for i, item := range b.arr {
			if item.k != jObj {
				continue
			}
			bp := "/bindings/" + strconv.Itoa(i)
			if id, ok := item.get("id").str(); ok {
				if ids[id] {
					bad(bp+"/id", fmt.Sprintf("binding id %q is used twice", id))
				}
				ids[id] = true
			}
			if at, ok := item.get("at").strs(); ok && havePts {
				for _, p := range pointsOf(at) {
					if !has[p] {
						bad(bp+"/at", fmt.Sprintf("%s is not in surface.interception_points", p))
					}
				}
			}
		}
	}
	if len(f) > 0 {
		return newDeclError(ClassInconsistent, f)
	}
	return nil
}

// ---- fill -------------------------------------------------------------------

// intOrNullValue reads a validated integer-or-null member: present reports
// whether the member exists; n is nil for null.
func intOrNullValue(v *jval) (n *uint64, present bool) {
	if v == nil {
		return nil, false
	}
	if v.k == jNull {
		return nil, true
	}
	x, _ := uintLiteral(v.s)
	return &x, true
}

func strOrNull(v *jval) *string {
	if s, ok := v.str(); ok {
		return &s
	}
	return nil
}

// fill builds the resolved declaration (every default filled) from a
// document that passed steps 2 to 7.
func fill(doc *jval, host *HostSurface) *Declaration {
	cfg := doc.get("configuration")
	d := &Declaration{
		version:     doc.get("declaration").s,
		spec:        points.SpecVersion,
		mode:        points.Enforce,
		composition: withKnobDefaults(statedComposition(doc)),
		posture:     PostureContinue,
		surface:     resolveSurface(doc, host),
		extensions:  &jval{k: jObj},
	}
	if s, ok := doc.get("spec").str(); ok {
		d.spec = s
	}
	d.id, _ = doc.get("id").str()
	if h := doc.get("host").object(); h != nil {
		d.hasHost = true
		d.hostName, _ = h.get("name").str()
		d.hostVersion, _ = h.get("version").str()
	}
	if m, ok := cfg.get("mode").str(); ok {
		d.mode = points.Mode(m)
	}
	jcsName := IdentityJCSSHA256
	d.identity = &jcsName
	if ip := cfg.get("identity_provider"); ip != nil {
		d.identity = strOrNull(ip)
	}
	d.resolverRef = strOrNull(cfg.get("approval").get("resolver"))
	d.redactorRef = strOrNull(cfg.get("approval").get("redactor"))
	if p, ok := cfg.get("posture").get("tool_seam_host_error").str(); ok {
		d.posture = p
	}
	def := uint64(defaultInterceptorMS)
	d.interceptorMS = &def
	if n, ok := intOrNullValue(cfg.get("timeouts").get("interceptor_ms")); ok {
		d.interceptorMS = n
	}
	d.approvalMS = d.interceptorMS
	if n, ok := intOrNullValue(cfg.get("timeouts").get("approval_resolver_ms")); ok {
		d.approvalMS, d.approvalSet = n, true
	}
	d.maxBuffered, _ = intOrNullValue(cfg.get("records").get("max_buffered"))
	if ext := doc.get("extensions").object(); ext != nil {
		d.extensions = ext
	}
	for _, item := range doc.get("bindings").arr {
		spec := BindingSpec{Config: json.RawMessage(`{}`)}
		spec.ID, _ = item.get("id").str()
		spec.Kind, _ = item.get("kind").str()
		cfgVal := &jval{k: jObj}
		if c := item.get("config"); c != nil {
			cfgVal = c
		}
		spec.Config = appendJSON(nil, cfgVal)
		d.configs = append(d.configs, cfgVal)
		if at, ok := item.get("at").strs(); ok {
			spec.At = pointsOf(at)
		} else {
			spec.At = slices.Clone(d.surface.InterceptionPoints)
		}
		ms := d.interceptorMS
		if n, ok := intOrNullValue(item.get("timeout_ms")); ok {
			ms = n
		}
		spec.Timeout = msDuration(ms)
		d.specs = append(d.specs, spec)
	}
	return d
}

// ---- step 8 -----------------------------------------------------------------

func checkSurface(doc *jval, d *Declaration, host *HostSurface) error {
	var f []Finding
	bad := func(p, format string, args ...any) {
		f = append(f, Finding{Path: p, Detail: fmt.Sprintf(format, args...)})
	}
	s := d.surface
	hostPts := pointSet(host.Points)
	for _, p := range s.InterceptionPoints {
		if !hostPts[p] {
			bad("/surface/interception_points", "the host does not emit %s", p)
		}
	}
	if host.EmitsAllPoints {
		declared := pointSet(s.InterceptionPoints)
		for _, p := range host.Points {
			if !declared[p] {
				bad("/surface/interception_points", "hooksproxy emits %s at every request that reaches it and cannot leave it out; list all eight points or omit interception_points", p)
			}
		}
	}
	if d.maxBuffered != nil && *d.maxBuffered > maxRecordQueue {
		bad("/configuration/records/max_buffered", "hooksproxy bounds its record queue at %d records", maxRecordQueue)
	}
	for _, c := range s.Capabilities {
		if !slices.Contains(host.Capabilities, c) {
			bad("/surface/capabilities", "the host does not have capability %q", c)
		}
	}
	for _, p := range sortedKeys(s.Profiles) {
		hs, ok := host.Profiles[p]
		switch {
		case !ok:
			bad(ptr("/surface/profiles", p), "the host does not support this profile")
		case !knobSubset(s.Profiles[p], hs):
			bad(ptr("/surface/profiles", p), "the host does not support every listed knob value")
		}
	}
	for _, v := range s.DeclarationVersions {
		if !slices.Contains(host.DeclarationVersions, v) {
			bad("/surface/declaration_versions", "the host does not accept %q", v)
		}
	}
	comp := d.composition
	if hs, ok := host.Profiles[comp.Profile]; !ok {
		bad("/configuration/composition/profile", "the host does not support profile %s", comp.Profile)
	} else {
		for _, k := range consultedKnobs(comp.Profile) {
			if v := knobOf(comp, k); !slices.Contains(hs[k], v) {
				bad(ptr("/configuration/composition", k), "the host does not support %s value %q under %s", k, v, comp.Profile)
			}
		}
	}
	if !s.BufferedOutput && !host.StreamsUnbuffered {
		bad("/surface/buffered_output", "the host buffers caller-bound output and cannot declare false")
	}
	if !slices.Contains(host.Postures, d.posture) {
		bad("/configuration/posture/tool_seam_host_error", "the host implements %s, not %s", strings.Join(host.Postures, ", "), d.posture)
	}
	if len(f) > 0 {
		return newDeclError(ClassSurfaceUnsupported, f)
	}
	return nil
}

// ---- steps 9, 10 and 11 -----------------------------------------------------

func resolveReferences(d *Declaration, reg Registry) error {
	var f []Finding
	if name := d.IdentityProvider(); name != "" && name != IdentityJCSSHA256 {
		p, ok := reg.IdentityProvider(name)
		if !ok || p == nil {
			f = append(f, Finding{"/configuration/identity_provider", fmt.Sprintf("no identity provider named %q is registered%s", name, elsewhere(reg, name, "identity_providers"))})
		}
		d.identityProvider = p
	}
	if d.resolverRef != nil {
		r, ok := reg.Resolver(*d.resolverRef)
		if !ok || r == nil {
			f = append(f, Finding{"/configuration/approval/resolver", fmt.Sprintf("no approval resolver named %q is registered%s", *d.resolverRef, elsewhere(reg, *d.resolverRef, "resolvers"))})
		}
		d.resolver = r
	}
	if d.redactorRef != nil {
		r, ok := reg.Redactor(*d.redactorRef)
		if !ok || r == nil {
			f = append(f, Finding{"/configuration/approval/redactor", fmt.Sprintf("no approval redactor named %q is registered%s", *d.redactorRef, elsewhere(reg, *d.redactorRef, "redactors"))})
		}
		d.redactor = r
	}
	if len(f) > 0 {
		return newDeclError(ClassReferenceUnresolved, f)
	}
	return nil
}

// elsewhere is a hint for a reference that names a component of another
// kind, as ` ("r" is defined under redactors:, a different table)`, or "".
func elsewhere(reg Registry, name, want string) string {
	for _, s := range []struct {
		section string
		has     func() bool
	}{
		{"resolvers", func() bool { r, ok := reg.Resolver(name); return ok && r != nil }},
		{"redactors", func() bool { r, ok := reg.Redactor(name); return ok && r != nil }},
		{"identity_providers", func() bool { p, ok := reg.IdentityProvider(name); return ok && p != nil }},
	} {
		if s.section != want && s.has() {
			return fmt.Sprintf(" (%q is defined under %s:, a different table)", name, s.section)
		}
	}
	return ""
}

func checkKinds(d *Declaration, reg Registry) error {
	var f []Finding
	for i, s := range d.specs {
		if !reg.HasKind(s.Kind) {
			f = append(f, Finding{fmt.Sprintf("/bindings/%d/kind", i), fmt.Sprintf("no resolver is registered for kind %q (binding %q)", s.Kind, s.ID)})
		}
	}
	if len(f) > 0 {
		return newDeclError(ClassKindUnknown, f)
	}
	return nil
}

// pointsChecker is implemented by interceptors that work only at some
// points (a budget counts and gates where it is bound): given the
// binding's points (none: every point), it says what could not work, so
// that a load refuses a binding that would silently do nothing.
type pointsChecker interface {
	CheckPoints(at []points.Point) error
}

// buildBindings runs the kind resolvers in array order. Every binding is
// built, so a refusal lists every refused binding, and every problem a
// resolver reports (an error tree of Unwrap() []error) is its own finding,
// located at the member a MemberError names. A panic is a refusal too,
// never a crash. A resolver that reports ErrUnknownKind makes the refusal
// kind_unknown, the earlier step, for those bindings alone.
//
// With knownOnly (after an earlier step failed), bindings of unregistered
// kinds are skipped and nothing is kept: only the refusals are wanted.
func buildBindings(d *Declaration, reg Registry, knownOnly bool) error {
	var rejected, unknown []Finding
	var causes []error
	defer func() {
		if knownOnly {
			d.bindings = nil
		}
	}()
	for i, s := range d.specs {
		if knownOnly && !reg.HasKind(s.Kind) {
			continue
		}
		ic, err := newInterceptor(reg, s)
		p := fmt.Sprintf("/bindings/%d", i)
		switch {
		case errors.Is(err, ErrUnknownKind):
			unknown = append(unknown, Finding{p + "/kind", fmt.Sprintf("no resolver is registered for kind %q (binding %q)", s.Kind, s.ID)})
			causes = append(causes, err)
			continue
		case err != nil:
			for _, leaf := range errorLeaves(err) {
				rejected = append(rejected, Finding{p + memberPointer(leaf), fmt.Sprintf("kind %q refused binding %q: %v", s.Kind, s.ID, leaf)})
			}
			causes = append(causes, err)
			continue
		case ic == nil:
			rejected = append(rejected, Finding{p, fmt.Sprintf("kind %q returned no interceptor for binding %q", s.Kind, s.ID)})
			continue
		}
		if pa, ok := ic.(PointsAdvisor); ok {
			if msg := pa.AdvisePoints(s.At); msg != "" {
				d.advice = append(d.advice, Finding{p + "/at", fmt.Sprintf("binding %q (kind %q): %s", s.ID, s.Kind, msg)})
			}
		}
		if pc, ok := ic.(pointsChecker); ok {
			if err := pc.CheckPoints(s.At); err != nil {
				rejected = append(rejected, Finding{p + "/at", fmt.Sprintf("kind %q refused binding %q: %v", s.Kind, s.ID, err)})
				causes = append(causes, err)
				continue
			}
		}
		d.bindings = append(d.bindings, points.Binding{
			Name:        s.ID,
			Interceptor: ic,
			At:          slices.Clone(s.At),
			Timeout:     s.Timeout,
		})
	}
	var e *DeclarationError
	switch {
	case len(unknown) > 0:
		e = newDeclError(ClassKindUnknown, unknown)
	case len(rejected) > 0:
		e = newDeclError(ClassBindingRejected, rejected)
	default:
		return nil
	}
	e.Err = errors.Join(causes...)
	d.bindings = nil
	return e
}

// MemberError is an error a kind resolver may return (alone, or among the
// errors of an Unwrap() []error tree) to locate the offending member of a
// binding's config: MemberPath is rooted at "config", with ".name" or
// ["name"] members and [n] indexes ("config.deny[2]",
// `config.match["a.b"].regex`). The loader then reports the problem at
// that member's line.
type MemberError interface {
	error
	MemberPath() string
}

// errorLeaves flattens err's Unwrap() []error tree into its leaves, in
// order; an error with a single cause is one leaf.
func errorLeaves(err error) []error {
	var out []error
	var walk func(error, int)
	walk = func(e error, depth int) {
		if m, ok := e.(interface{ Unwrap() []error }); ok && depth < 8 {
			for _, x := range m.Unwrap() {
				if x != nil {
					walk(x, depth+1)
				}
			}
			return
		}
		out = append(out, e)
	}
	walk(err, 0)
	if len(out) == 0 {
		out = append(out, err)
	}
	return out
}

// memberPointer is the JSON pointer, relative to the binding, of the member
// a MemberError in err names ("/config/deny/2"), or "" when err names none
// or its path does not parse.
func memberPointer(err error) string {
	var me MemberError
	if !errors.As(err, &me) {
		return ""
	}
	p, ok := configPathPointer(me.MemberPath())
	if !ok {
		return ""
	}
	return p
}

// configPathPointer converts a member path rooted at "config" into a JSON
// pointer ("config.a[0][\"b.c\"]" is "/config/a/0/b.c").
func configPathPointer(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "config")
	if !ok {
		return "", false
	}
	out := "/config"
	for rest != "" {
		switch rest[0] {
		case '.':
			i := 1
			for i < len(rest) && rest[i] != '.' && rest[i] != '[' {
				i++
			}
			if i == 1 {
				return "", false
			}
			out = ptr(out, rest[1:i])
			rest = rest[i:]
		case '[':
			if len(rest) > 1 && rest[1] == '"' {
				// A JSON string: find its closing quote, skipping escapes.
				i := 2
				for i < len(rest) && rest[i] != '"' {
					if rest[i] == '\\' {
						i++
					}
					i++
				}
				if i+1 >= len(rest) || rest[i+1] != ']' {
					return "", false
				}
				var key string
				if err := json.Unmarshal([]byte(rest[1:i+1]), &key); err != nil {
					return "", false
				}
				out = ptr(out, key)
				rest = rest[i+2:]
				continue
			}
			end := strings.IndexByte(rest, ']')
			if end < 2 {
				return "", false
			}
			if _, err := strconv.ParseUint(rest[1:end], 10, 31); err != nil {
				return "", false
			}
			out += "/" + rest[1:end]
			rest = rest[end+1:]
		default:
			return "", false
		}
	}
	return out, true
}

func newInterceptor(reg Registry, s BindingSpec) (ic points.Interceptor, err error) {
	defer func() {
		if r := recover(); r != nil {
			ic, err = nil, fmt.Errorf("kind resolver panicked: %v", r)
		}
	}()
	s.Config = slices.Clone(s.Config)
	s.At = slices.Clone(s.At)
	return reg.NewInterceptor(s)
}

// ---- resolved form ----------------------------------------------------------

func jstr(s string) *jval { return &jval{k: jStr, s: s} }

func jstrOrNull(s *string) *jval {
	if s == nil {
		return &jval{k: jNull}
	}
	return jstr(*s)
}

func juintOrNull(n *uint64) *jval {
	if n == nil {
		return &jval{k: jNull}
	}
	return &jval{k: jNum, s: strconv.FormatUint(*n, 10)}
}

func jstrs(ss []string) *jval {
	v := &jval{k: jArr}
	for _, s := range ss {
		v.arr = append(v.arr, jstr(s))
	}
	return v
}

func jpoints(ps []points.Point) *jval {
	v := &jval{k: jArr}
	for _, p := range ps {
		v.arr = append(v.arr, jstr(string(p)))
	}
	return v
}

func jobj(members ...jmember) *jval { return &jval{k: jObj, obj: members} }

// resolvedForm is the §7.7.3 resolved declaration as JSON ($schema dropped,
// sets in their canonical order); the caller canonicalizes it.
func (d *Declaration) resolvedForm() *jval {
	bindings := &jval{k: jArr}
	for i, s := range d.specs {
		cfg := d.configs[i]
		var ms *uint64
		if s.Timeout != Unbounded {
			n := uint64(s.Timeout / time.Millisecond)
			ms = &n
		}
		bindings.arr = append(bindings.arr, jobj(
			jmember{"at", jpoints(s.At)},
			jmember{"config", cfg},
			jmember{"id", jstr(s.ID)},
			jmember{"kind", jstr(s.Kind)},
			jmember{"timeout_ms", juintOrNull(ms)},
		))
	}
	comp := jobj(jmember{"profile", jstr(d.composition.Profile)})
	for _, k := range consultedKnobs(d.composition.Profile) {
		comp.obj = append(comp.obj, jmember{k, jstr(knobOf(d.composition, k))})
	}
	configuration := jobj(
		jmember{"approval", jobj(jmember{"redactor", jstrOrNull(d.redactorRef)}, jmember{"resolver", jstrOrNull(d.resolverRef)})},
		jmember{"composition", comp},
		jmember{"identity_provider", jstrOrNull(d.identity)},
		jmember{"mode", jstr(string(d.mode))},
		jmember{"posture", jobj(jmember{"tool_seam_host_error", jstr(d.posture)})},
		jmember{"records", jobj(jmember{"max_buffered", juintOrNull(d.maxBuffered)})},
		jmember{"timeouts", jobj(jmember{"approval_resolver_ms", juintOrNull(d.approvalMS)}, jmember{"interceptor_ms", juintOrNull(d.interceptorMS)})},
	)
	profiles := jobj()
	for _, p := range sortedKeys(d.surface.Profiles) {
		knobs := jobj()
		for _, k := range sortedKeys(d.surface.Profiles[p]) {
			knobs.obj = append(knobs.obj, jmember{k, jstrs(sortedSet(d.surface.Profiles[p][k]))})
		}
		profiles.obj = append(profiles.obj, jmember{p, knobs})
	}
	surface := jobj(
		jmember{"buffered_output", &jval{k: jBool, b: d.surface.BufferedOutput}},
		jmember{"capabilities", jstrs(d.surface.Capabilities)},
		jmember{"declaration_versions", jstrs(d.surface.DeclarationVersions)},
		jmember{"interception_points", jpoints(d.surface.InterceptionPoints)},
		jmember{"profiles", profiles},
	)
	if !d.surface.BufferedOutput && d.surface.ExposureBound != "" {
		surface.obj = append(surface.obj, jmember{"exposure_bound", jstr(d.surface.ExposureBound)})
	}
	root := jobj(
		jmember{"bindings", bindings},
		jmember{"configuration", configuration},
		jmember{"declaration", jstr(d.version)},
		jmember{"extensions", d.extensions},
		jmember{"spec", jstr(d.spec)},
		jmember{"surface", surface},
	)
	if d.hasHost {
		host := jobj(jmember{"name", jstr(d.hostName)})
		if d.hostVersion != "" {
			host.obj = append(host.obj, jmember{"version", jstr(d.hostVersion)})
		}
		root.obj = append(root.obj, jmember{"host", host})
	}
	if d.id != "" {
		root.obj = append(root.obj, jmember{"id", jstr(d.id)})
	}
	return root
}
