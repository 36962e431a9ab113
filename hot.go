package seckill

import "time"

// CoolMargin is how long after its last hold could have expired (ends_at + hold_seconds) a
// sale stays hot: a hold granted at the end may still expire, and the events of its last
// changes still reach the order store and the sinks.
const CoolMargin = time.Minute

// HotFrom is when the sale becomes hot: PreheatSeconds before starts_at.
func (s Sale) HotFrom() time.Time {
	return s.StartsAt.Add(-time.Duration(max(s.PreheatSeconds, 0)) * time.Second)
}

// HotUntil is when the sale stops being hot by its window: its last hold has expired
// (ends_at + hold_seconds) and CoolMargin has passed.
func (s Sale) HotUntil() time.Time { return s.EndsAt.Add(s.HoldDuration() + CoolMargin) }

// HotAt reports whether the sale is in its hot window at now (docs/MODEL.md "Hot and cold
// sales"): from HotFrom until HotUntil. Only hot sales get the engine's background work (the
// sweepers, the stream readers, the export); a sale outside its window is cold, and an engine
// that loads sales on demand keeps no state of it until something changes it. (A cold sale
// that a late payment or an admin's change touches is loaded again for that change, and its
// state may stay loaded until it has settled; the window alone says what is hot.)
func (s Sale) HotAt(now time.Time) bool {
	return !now.Before(s.HotFrom()) && now.Before(s.HotUntil())
}
