package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hooksproxy/hooksproxy"
	"github.com/hooksproxy/hooksproxy/config"
	"github.com/hooksproxy/hooksproxy/ctk"
	"github.com/hooksproxy/hooksproxy/points"
)

// The wire forms a conformance run can drive each seam with.
const (
	wirePlain  = "plain"
	wireStream = "stream"
)

// variant is one way of driving the proxy through every vector.
type variant struct {
	Seam string `json:"seam"`
	Wire string `json:"wire"`
}

func (v variant) String() string { return v.Seam + "/" + v.Wire }

// variantResult is one vector's result under one variant.
type variantResult struct {
	variant
	Status     string   `json:"status"`
	Failures   []string `json:"failures,omitempty"`
	SkipReason string   `json:"skip_reason,omitempty"`
}

// vectorResult is one vector over every variant: it fails when any variant
// fails, passes when it ran and passed everywhere it ran, and is skipped
// when no variant could run it.
type vectorResult struct {
	ctk.Result
	Variants []variantResult `json:"variants"`
}

// claim is the §13.3 claim tuple of CLAIMS.md.
type claim struct {
	Framework        string   `json:"framework"`
	Adapter          string   `json:"adapter"`
	Version          string   `json:"version"`
	Spec             string   `json:"spec"`
	Capabilities     []string `json:"capabilities"`
	Profiles         []string `json:"profiles"`
	IdentityProvider string   `json:"identity_provider"`
	SDK              string   `json:"sdk"`
}

func (c claim) String() string {
	return fmt.Sprintf("(%s, %s %s, %s, {%s}, {%s}, %s, %s)", c.Framework, c.Adapter, c.Version, c.Spec,
		strings.Join(c.Capabilities, ", "), strings.Join(c.Profiles, ", "), c.IdentityProvider, c.SDK)
}

// surface is the declared surface the claim attests (§13.1).
type surface struct {
	Capabilities     []string                       `json:"capabilities"`
	Profiles         map[string]map[string][]string `json:"profiles"`
	IdentityProvider string                         `json:"identity_provider"`
	BufferedOutput   bool                           `json:"buffered_output"`
	Postures         map[string]string              `json:"postures"`
}

// exercised says what the run drove.
type exercised struct {
	Source  string   `json:"source"`
	Vectors int      `json:"vectors"`
	Seams   []string `json:"seams"`
	Wires   []string `json:"wires"`
	Runs    int      `json:"runs"`
}

type partRow struct {
	Part    string `json:"part"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
}

// report is the --json document.
type report struct {
	Results   []vectorResult `json:"results"`
	Tally     partRow        `json:"tally"`
	Parts     []partRow      `json:"parts"`
	Claim     claim          `json:"claim"`
	Surface   surface        `json:"surface"`
	Exercised exercised      `json:"exercised"`
}

// profileOrder is the §7.2 order the surface lists profiles in.
var profileOrder = []string{points.ProfileFirstDeny, points.ProfileRunAll, points.ProfileStrictest, points.ProfileUnanimous}

func conformance(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fset.SetOutput(stderr)
	setUsage(fset, "Runs the AGENT-HOOKS conformance vectors (AH-CTK-*) end to end over HTTP against this\nbuild, prints each result, the tally line and the claim. Exit status 1 if any fails.")
	dir := fset.String("vectors", "", "directory holding AH-CTK-*.json vectors, searched recursively (default: the embedded agent-hooks-0.1 vectors, declaration vectors included)")
	asJSON := fset.Bool("json", false, "print one JSON document instead of the text report")
	seamFlag := fset.String("seam", "both", "tool seam to drive: host-api, transparent or both")
	wireFlag := fset.String("wire", "both", "chat wire to drive: plain, stream or both")
	if code, stop := parseFlags(fset, args); stop {
		return code
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "hooksproxy conformance: unexpected argument %q\n", fset.Arg(0))
		return 2
	}
	seams, ok := choice(*seamFlag, ctk.SeamHostAPI, ctk.SeamTransparent)
	if !ok {
		fmt.Fprintf(stderr, "hooksproxy conformance: --seam must be %s, %s or both\n", ctk.SeamHostAPI, ctk.SeamTransparent)
		return 2
	}
	wires, ok := choice(*wireFlag, wirePlain, wireStream)
	if !ok {
		fmt.Fprintf(stderr, "hooksproxy conformance: --wire must be %s, %s or both\n", wirePlain, wireStream)
		return 2
	}

	var (
		vectors []ctk.Vector
		source  string
		err     error
	)
	if *dir == "" {
		source = "embedded " + path.Base(hooksproxy.CTKRoot)
		vectors, err = loadVectors(hooksproxy.CTKData, hooksproxy.CTKRoot, source)
	} else {
		source = *dir
		vectors, err = loadVectorDir(*dir)
	}
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy conformance:", err)
		return 1
	}

	var variants []variant
	for _, s := range seams {
		for _, w := range wires {
			variants = append(variants, variant{Seam: s, Wire: w})
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	perVariant, caps, err := runVariants(ctx, variants, vectors)
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy conformance:", err)
		return 1
	}

	rep := buildReport(vectors, variants, perVariant, caps)
	rep.Exercised = exercised{Source: source, Vectors: len(vectors), Seams: seams, Wires: wires, Runs: len(vectors) * len(variants)}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "hooksproxy conformance:", err)
			return 1
		}
	} else {
		printReport(stdout, rep)
	}
	if rep.Tally.Failed > 0 {
		return 1
	}
	return 0
}

// choice expands a flag value that names one of a, b or "both".
func choice(v, a, b string) ([]string, bool) {
	switch v {
	case a, b:
		return []string{v}, true
	case "both":
		return []string{a, b}, true
	}
	return nil, false
}

// loadVectorDir loads the vectors under the directory the user named;
// every message names that directory as given.
func loadVectorDir(dir string) ([]ctk.Vector, error) {
	st, err := os.Stat(dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("--vectors %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("--vectors %s: not a directory", dir)
	}
	return loadVectors(os.DirFS(dir), ".", dir)
}

// loadVectors loads every directory under root that holds AH-CTK-*.json
// files (a flat directory, or a spec checkout with its core and
// declaration vector directories), sorted by id; an id found twice is an
// error, and so is finding none. Messages name root as label (the
// directory the user gave), and the directories under it relative to it.
func loadVectors(fsys fs.FS, root, label string) ([]ctk.Vector, error) {
	shown := func(p string) string {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if rel == "" || rel == "." {
			return label
		}
		if root == "." {
			rel = p
		}
		return filepath.Join(label, filepath.FromSlash(rel))
	}
	var dirs []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "AH-CTK-") && strings.HasSuffix(d.Name(), ".json") {
			if dir := path.Dir(p); !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("reading vectors: %s: %w", shown(pe.Path), pe.Err)
		}
		return nil, fmt.Errorf("reading vectors under %s: %w", label, err)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no AH-CTK-*.json vectors under %s", label)
	}
	var out []ctk.Vector
	seen := map[string]string{}
	for _, d := range dirs {
		vs, err := ctk.LoadFS(fsys, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shown(d), err)
		}
		for _, v := range vs {
			where := shown(path.Join(d, v.File))
			if prev, dup := seen[v.ID]; dup {
				return nil, fmt.Errorf("vector %s is defined twice: %s and %s", v.ID, prev, where)
			}
			seen[v.ID] = where
			out = append(out, v)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// runVariants runs every vector under every variant, one harness per
// variant, the variants side by side (each has its own loopback proxy and
// upstream). It returns the results by variant and the union of the
// capabilities the harnesses declared.
func runVariants(ctx context.Context, variants []variant, vectors []ctk.Vector) ([][]ctk.Result, []string, error) {
	harnesses := make([]*ctk.HTTP, len(variants))
	for i, v := range variants {
		h, err := ctk.NewHTTP(v.Seam)
		if err != nil {
			for _, prev := range harnesses[:i] {
				prev.Close()
			}
			return nil, nil, err
		}
		h.Stream = v.Wire == wireStream
		harnesses[i] = h
	}
	out := make([][]ctk.Result, len(variants))
	var wg sync.WaitGroup
	for i, h := range harnesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer h.Close()
			out[i] = ctk.RunContext(ctx, h, vectors)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("interrupted: %w", err)
	}
	var caps []string
	for _, h := range harnesses {
		for _, c := range h.Capabilities() {
			// buffered_output is a declaration, reported on its own line.
			if c != ctk.CapBufferedOutput && !slices.Contains(caps, c) {
				caps = append(caps, c)
			}
		}
	}
	sort.Strings(caps)
	return out, caps, nil
}

// merge folds one vector's per-variant results into one.
func merge(variants []variant, rs []ctk.Result) vectorResult {
	out := vectorResult{Result: ctk.Result{ID: rs[0].ID, Title: rs[0].Title, Part: rs[0].Part, Status: ctk.StatusSkip}}
	ran := false
	for i, r := range rs {
		out.Variants = append(out.Variants, variantResult{variant: variants[i], Status: r.Status, Failures: r.Failures, SkipReason: r.SkipReason})
		switch r.Status {
		case ctk.StatusFail:
			out.Status = ctk.StatusFail
			for _, f := range r.Failures {
				out.Failures = append(out.Failures, "["+variants[i].String()+"] "+f)
			}
		case ctk.StatusPass:
			ran = true
		default:
			if out.SkipReason == "" {
				out.SkipReason = r.SkipReason
			}
		}
	}
	switch {
	case out.Status == ctk.StatusFail:
		out.SkipReason = ""
	case ran:
		out.Status, out.SkipReason = ctk.StatusPass, ""
	}
	return out
}

func buildReport(vectors []ctk.Vector, variants []variant, perVariant [][]ctk.Result, caps []string) report {
	var rep report
	parts := map[string]*partRow{}
	for i := range vectors {
		rs := make([]ctk.Result, len(variants))
		for j := range variants {
			rs[j] = perVariant[j][i]
		}
		r := merge(variants, rs)
		rep.Results = append(rep.Results, r)
		row := parts[r.Part]
		if row == nil {
			row = &partRow{Part: r.Part}
			parts[r.Part] = row
		}
		for _, t := range []*partRow{row, &rep.Tally} {
			switch r.Status {
			case ctk.StatusPass:
				t.Passed++
			case ctk.StatusFail:
				t.Failed++
			default:
				t.Skipped++
			}
		}
	}
	for _, row := range parts {
		rep.Parts = append(rep.Parts, *row)
	}
	sort.Slice(rep.Parts, func(i, j int) bool { return rep.Parts[i].Part < rep.Parts[j].Part })

	profiles := config.DefaultSurface().Profiles
	var names []string
	for _, p := range profileOrder {
		if _, ok := profiles[p]; ok {
			names = append(names, p)
		}
	}
	rep.Claim = claim{
		Framework: "openai-compatible", Adapter: "hooksproxy", Version: buildVersion(),
		Spec: points.SpecVersion, Capabilities: caps, Profiles: names,
		IdentityProvider: ctk.ProviderJCS, SDK: "go@" + strings.TrimPrefix(goruntime.Version(), "go"),
	}
	rep.Surface = surface{
		Capabilities: caps, Profiles: profiles, IdentityProvider: ctk.ProviderJCS, BufferedOutput: true,
		Postures: map[string]string{ctk.PostureToolSeamHostError: ctk.PostureContinue},
	}
	return rep
}

func printReport(w io.Writer, rep report) {
	for _, r := range rep.Results {
		switch r.Status {
		case ctk.StatusPass:
			fmt.Fprintf(w, "PASS %s %s\n", r.ID, r.Title)
		case ctk.StatusFail:
			fmt.Fprintf(w, "FAIL %s %s\n", r.ID, r.Title)
			for _, f := range r.Failures {
				fmt.Fprintf(w, "    - %s\n", strings.ReplaceAll(f, "\n", "\n      "))
			}
		default:
			fmt.Fprintf(w, "SKIP %s %s (%s)\n", r.ID, r.Title, r.SkipReason)
		}
	}
	t := rep.Tally
	fmt.Fprintf(w, "ctk: %d passed, %d failed, %d skipped\n", t.Passed, t.Failed, t.Skipped)
	fmt.Fprintf(w, "claim: %s\n", rep.Claim)

	s := rep.Surface
	fmt.Fprintln(w, "declared surface:")
	fmt.Fprintf(w, "  capabilities:      %s\n", strings.Join(s.Capabilities, ", "))
	for i, p := range rep.Claim.Profiles {
		label := ""
		if i == 0 {
			label = "profiles:"
		}
		fmt.Fprintf(w, "  %-18s %s%s\n", label, p, knobText(s.Profiles[p]))
	}
	fmt.Fprintf(w, "  identity provider: %s (content-derived; vectors may select null or ctk-fault)\n", s.IdentityProvider)
	fmt.Fprintf(w, "  buffered_output:   %t\n", s.BufferedOutput)
	fmt.Fprintf(w, "  posture:           %s: %s\n", ctk.PostureToolSeamHostError, s.Postures[ctk.PostureToolSeamHostError])
	e := rep.Exercised
	fmt.Fprintf(w, "  exercised:         %d vectors (%s) x seams %s x wire %s = %d runs\n",
		e.Vectors, e.Source, strings.Join(e.Seams, ", "), strings.Join(e.Wires, ", "), e.Runs)
	fmt.Fprintln(w, "report by part:")
	for _, p := range rep.Parts {
		name := p.Part
		if name == "" {
			name = "(core)"
		}
		fmt.Fprintf(w, "  %-34s %d passed, %d failed, %d skipped\n", name, p.Passed, p.Failed, p.Skipped)
	}
}

// knobText renders a profile's knobs: " (on_approval: stop, resume)".
func knobText(knobs map[string][]string) string {
	if len(knobs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(knobs))
	for k := range knobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+strings.Join(knobs[k], ", "))
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
