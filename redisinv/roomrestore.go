// Restoring a waiting room from its journal (seckill.RoomRestorer; docs/DECISIONS.md "Rooms
// recover from the database"): room_restore.lua in steps of bounded work. A rebuild of a sale
// with a room (rebuild.go) restores it under its token while the sale is still loading, so that
// between the loss and the restore the room answers unavailable, never an empty room; the
// entrants come from the RoomSource the service gives (WithRoomSource), which alone knows the
// seed the draw keys are computed from.

package redisinv

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/seckill-go/seckill"
)

var _ seckill.RoomRestorer = (*Engine)(nil)

// RoomSource reads a sale's room from the journal with its entrants' draw keys
// (service.Service.RoomJournal).
type RoomSource func(ctx context.Context, sale seckill.Sale) ([]seckill.RestoredEntrant, seckill.RoomAdmissions, error)

// roomSourceBox holds the engine's RoomSource (set after the engine was made: the service that
// provides it is built on the engine).
type roomSourceBox struct{ p atomic.Pointer[RoomSource] }

// SetRoomSource makes every later rebuild of a sale with a room restore the room from src.
// Without it a rebuilt sale's room starts empty, as it did before rooms were journaled.
func (e *Engine) SetRoomSource(src RoomSource) { e.roomSource.p.Store(&src) }

func (e *Engine) roomSourceFn() RoomSource {
	if p := e.roomSource.p.Load(); p != nil {
		return *p
	}
	return nil
}

// roomRestoreChunk is how many entrants one 'add' step carries (room_restore.lua's bound).
const roomRestoreChunk = 500

// RestoreRoom is seckill.RoomRestorer.RestoreRoom, outside a rebuild: the sale must be loaded
// and not being rebuilt (unavailable otherwise).
func (e *Engine) RestoreRoom(ctx context.Context, sale seckill.Sale, es []seckill.RestoredEntrant, adm seckill.RoomAdmissions) error {
	return e.restoreRoom(ctx, sale, es, adm, "")
}

// restoreRoom writes the room in steps: 'begin' (the room marked restoring, emptied), 'add'
// per chunk, 'end'. token is the rebuild's ("" outside one).
func (e *Engine) restoreRoom(ctx context.Context, sale seckill.Sale, es []seckill.RestoredEntrant, adm seckill.RoomAdmissions, token string) error {
	if !seckill.ValidID(sale.ID) {
		return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", sale.ID)
	}
	if len(es) > MaxRoomEntrants {
		return seckill.Errorf(seckill.CodeInvalidArgument, "a room holds at most %d entrants", MaxRoomEntrants)
	}
	draw := sale.Room == nil || sale.Room.Order != seckill.RoomFIFO
	// The room's order: the drawn by (draw key, id), the others by arrival (seckill.DrawOrder).
	order := make([]seckill.RestoredEntrant, 0, len(es))
	seen := make(map[string]bool, len(es))
	for _, x := range es {
		if !seckill.ValidEntrant(x.Entrant) {
			return errEntrant()
		}
		if x.Arrival < 1 || x.Arrival > seckill.MaxQuantity {
			return seckill.Errorf(seckill.CodeInvalidArgument, "an arrival is 1 to %d", seckill.MaxQuantity)
		}
		if seen[x.Entrant] {
			continue
		}
		seen[x.Entrant] = true
		x.Drawn = x.Drawn && draw
		if x.Drawn && x.DrawKey >= 1<<48 {
			return seckill.Errorf(seckill.CodeInvalidArgument, "a draw key is below 2^48 (seckill.DrawKey)")
		}
		order = append(order, x)
	}
	slices.SortFunc(order, func(a, b seckill.RestoredEntrant) int {
		switch {
		case a.Drawn && b.Drawn:
			if c := cmp.Compare(a.DrawKey, b.DrawKey); c != 0 {
				return c
			}
			return strings.Compare(a.Entrant, b.Entrant)
		case a.Drawn != b.Drawn:
			if a.Drawn {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Arrival, b.Arrival)
	})
	admitted := min(max(adm.Count, 0), int64(len(order)))
	var pre, seq int64
	for _, x := range order {
		if x.Drawn {
			pre++
		}
		seq = max(seq, x.Arrival)
	}
	step := func(args ...string) error {
		msgs, err := e.run(ctx, e.rooms().restore, e.roomKeys(sale.ID), append([]string{e.clockArg()}, args...))
		if err != nil {
			err = fmt.Errorf("redisinv: room_restore script for sale %s: %w", sale.ID, err)
			if transient(err) {
				return errUnavailable(err)
			}
			return err
		}
		r, _, err := splitVersion(msgs)
		if err != nil {
			return fmt.Errorf("redisinv: room_restore script for sale %s: %w", sale.ID, err)
		}
		switch r.code() {
		case "ok":
			return nil
		case "not_loaded":
			return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", sale.ID)
		case "loading", "not_begun":
			return seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", sale.ID)
		case "fenced":
			return errFenced
		case "no_room":
			return errNoRoom(sale.ID)
		case "segmented":
			return seckill.Errorf(seckill.CodeInvalidArgument, "sale %q is split in segments and has no waiting room", sale.ID)
		}
		return unexpected("room_restore", r)
	}
	if err := step("begin", token); err != nil {
		return err
	}
	at := i64toa(max(adm.At.UnixMilli(), 0))
	for i := 0; i < len(order); i += roomRestoreChunk {
		chunk := order[i:min(len(order), i+roomRestoreChunk)]
		args := make([]string, 0, 3+6*len(chunk))
		args = append(args, "add", token, at)
		for j, x := range chunk {
			score := uint64(1<<48) + uint64(x.Arrival)
			if x.Drawn {
				score = x.DrawKey
			}
			index := int64(0)
			if n := int64(i + j + 1); n <= admitted {
				index = n
			}
			args = append(args, x.Entrant, i64toa(max(x.JoinedAt.UnixMilli(), 0)), boolArg(x.Drawn), i64toa(x.Arrival),
				strconv.FormatUint(score, 10), i64toa(index))
		}
		if err := step(args...); err != nil {
			return err
		}
	}
	return step("end", token, itoa(len(order)), i64toa(pre), i64toa(admitted), i64toa(seq))
}

// rebuildRoom restores the room of def, a sale being rebuilt under token, from the RoomSource
// (nothing without one, or for a sale without a room).
func (e *Engine) rebuildRoom(ctx context.Context, def seckill.Sale, token string) error {
	src := e.roomSourceFn()
	if src == nil || def.Room == nil {
		return nil
	}
	es, adm, err := src(ctx, def)
	if err != nil {
		return err
	}
	return e.restoreRoom(ctx, def, es, adm, token)
}
