//go:build race

package bench

// raceEnabled: the race detector's instrumented frames are larger, so
// stack figures measured under it say nothing of a normal build.
const raceEnabled = true
