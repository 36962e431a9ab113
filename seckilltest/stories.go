package seckilltest

import "testing"

// story is one named subtest of a suite's table (TestOrderStore, TestOutbox, TestSink), run on
// what the suite hands each one: a fresh store, a fresh outbox, the sink harness.
type story[H any] struct {
	name string
	fn   func(t *testing.T, h H)
}

// runStories runs each story as a subtest, in the table's order, on what get returns for it;
// a story named in skip is skipped with its reason.
func runStories[H any](t *testing.T, stories []story[H], skip map[string]string, get func(t *testing.T) H) {
	t.Helper()
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) {
			if why, ok := skip[s.name]; ok {
				t.Skip(why)
			}
			s.fn(t, get(t))
		})
	}
}
