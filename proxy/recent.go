package proxy

// recent is a map that keeps only its most recent max entries, oldest out.
// It is not safe for concurrent use: its owners lock around it.
type recent[V any] struct {
	m     map[string]recentEntry[V]
	order []recentRef // insertion order; stale refs are skipped
	gen   uint64
	max   int
	// evicted, when set, is told of every entry the bound pushes out.
	evicted func(V)
}

type recentEntry[V any] struct {
	v   V
	gen uint64
}

type recentRef struct {
	key string
	gen uint64
}

func newRecent[V any](max int) *recent[V] {
	return &recent[V]{m: map[string]recentEntry[V]{}, max: max}
}

// put stores v under k as the most recent entry, then forgets the oldest
// beyond max. k must be owned (not a view of a request).
func (r *recent[V]) put(k string, v V) {
	r.gen++
	r.m[k] = recentEntry[V]{v: v, gen: r.gen}
	r.order = append(r.order, recentRef{key: k, gen: r.gen})
	for len(r.m) > r.max || len(r.order) > 2*r.max {
		r.popRef()
	}
}

// popRef takes the oldest ref off the order and forgets its entry if the
// ref is still its own (not stale), telling evicted; it reports whether
// it forgot one.
func (r *recent[V]) popRef() bool {
	old := r.order[0]
	r.order[0] = recentRef{}
	r.order = r.order[1:]
	e, ok := r.m[old.key]
	if !ok || e.gen != old.gen {
		return false
	}
	delete(r.m, old.key)
	if r.evicted != nil {
		r.evicted(e.v)
	}
	return true
}

func (r *recent[V]) get(k string) (V, bool) {
	e, ok := r.m[k]
	return e.v, ok
}

func (r *recent[V]) del(k string) { delete(r.m, k) }

// dropOldest forgets the oldest entry, telling evicted, and reports
// whether there was one: for owners that bound their entries' bytes too.
func (r *recent[V]) dropOldest() bool {
	for len(r.order) > 0 {
		if r.popRef() {
			return true
		}
	}
	return false
}
