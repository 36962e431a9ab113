package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/wait"
)

// The rooms' journal, the service's side (docs/DECISIONS.md "Rooms recover from the
// database", "An admission is told once it is journaled"): every join's entrant is buffered
// here and written to the order store (seckill.RoomJournal) in batches by a background service.
// The admitter admits without telling (seckill.RoomTeller), writes the admitted entrants' rows
// and the room's count itself, and only then tells them: no one is told an admission the
// journal does not hold. A crash loses what the buffer holds (at most the joins of one flush
// interval, never an admitted entrant's); a full buffer drops the joins beyond its bound, logged.

// MaxRoomJournalPending bounds the journal's buffer: joins beyond it are not journaled (and
// logged), so that a database that is down costs bounded memory.
const MaxRoomJournalPending = 100_000

// roomJournal buffers joins for the store's journal.
type roomJournal struct {
	j seckill.RoomJournal

	mu      sync.Mutex
	pending []seckill.RoomEntrant
	dropped int64

	flushMu sync.Mutex // one flush at a time: batches are written in buffer order
}

// add buffers an entrant; false when the buffer is full and it was dropped.
func (rj *roomJournal) add(e seckill.RoomEntrant) bool {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	if len(rj.pending) >= MaxRoomJournalPending {
		rj.dropped++
		return false
	}
	rj.pending = append(rj.pending, e)
	return true
}

// flush writes what the buffer holds, in batches; a batch that fails goes back to the head of
// the buffer (within its bound) for the next flush.
func (rj *roomJournal) flush(ctx context.Context) error {
	rj.flushMu.Lock()
	defer rj.flushMu.Unlock()
	rj.mu.Lock()
	batch := rj.pending
	rj.pending = nil
	rj.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), seckill.MaxRoomJournalBatch)
		if err := rj.j.AddRoomEntrants(ctx, batch[:n]); err != nil {
			rj.mu.Lock()
			rest := append(batch, rj.pending...)
			if len(rest) > MaxRoomJournalPending {
				rj.dropped += int64(len(rest) - MaxRoomJournalPending)
				rest = rest[:MaxRoomJournalPending]
			}
			rj.pending = rest
			rj.mu.Unlock()
			return fmt.Errorf("journal %d room entrants: %w", len(batch), err)
		}
		batch = batch[n:]
	}
	return nil
}

// journalJoin buffers the entrant of a join's ticket (a ticket of a closed room, which keeps
// no one, has no arrival and is not journaled). A join answered again journals again: the
// store keeps the first.
func (s *Service) journalJoin(ctx context.Context, sale seckill.Sale, t seckill.Ticket) {
	if s.journal == nil || t.Arrival <= 0 {
		return
	}
	e := seckill.RoomEntrant{SaleID: sale.ID, Incarnation: sale.Incarnation, Entrant: t.Entrant, Arrival: t.Arrival,
		Drawn: t.Drawn, JoinedAt: t.JoinedAt}
	if !s.journal.add(e) {
		s.troubles.Log(ctx, slog.LevelWarn, "room journal full", "waiting room: the journal's buffer is full (the database is slow or down); a join was not journaled and a restore would miss it",
			"sale", sale.ID)
	}
}

// admit admits in the sale's room. With a journal and an engine that can hold admissions
// untold (seckill.RoomTeller), the admissions are told only after the journal holds them: the
// admitted entrants' rows (written again if their joins' rows are already there, or still in
// some instance's buffer) and the room's count. An error after the admission leaves them
// untold: the next pass, on any instance, is answered them again and journals them. Without a
// journal every admission is told at once (Admit).
func (s *Service) admit(ctx context.Context, sale seckill.Sale, now time.Time) (seckill.RoomState, error) {
	teller, ok := s.rooms.(seckill.RoomTeller)
	if s.journal == nil || !ok {
		return s.rooms.Admit(ctx, sale)
	}
	st, u, err := teller.AdmitUntold(ctx, sale)
	if err != nil || len(u.Entrants) == 0 {
		return st, err
	}
	rows := make([]seckill.RoomEntrant, len(u.Entrants))
	for i, e := range u.Entrants {
		e.SaleID, e.Incarnation = sale.ID, sale.Incarnation
		rows[i] = e
	}
	for len(rows) > 0 {
		n := min(len(rows), seckill.MaxRoomJournalBatch)
		if err := s.journal.j.AddRoomEntrants(ctx, rows[:n]); err != nil {
			return st, fmt.Errorf("journal the admitted entrants of sale %s: %w", sale.ID, err)
		}
		rows = rows[n:]
	}
	last := u.Last()
	if err := s.journal.j.SetRoomAdmitted(ctx, sale.ID, sale.Incarnation, last, now); err != nil {
		return st, fmt.Errorf("journal the admissions of sale %s: %w", sale.ID, err)
	}
	if err := teller.TellAdmitted(ctx, sale.ID, last); err != nil {
		return st, fmt.Errorf("tell the admissions of sale %s: %w", sale.ID, err)
	}
	told := st.Admitted
	st.Admitted = max(st.Admitted, last)
	st.Waiting -= st.Admitted - told
	return st, nil
}

// RoomJournaler returns the background service "room-journal" that writes the buffered joins
// every interval; its exit writes what is left (within the stop's deadline). Without a
// journal (a store that keeps none, an engine without rooms) it does nothing.
func (s *Service) RoomJournaler(interval time.Duration) background.Service {
	return roomJournaler{s: s, interval: interval}
}

type roomJournaler struct {
	s        *Service
	interval time.Duration
}

func (roomJournaler) Name() string { return "room-journal" }

func (r roomJournaler) Run(ctx context.Context) error {
	if r.s.journal == nil {
		<-ctx.Done()
		return nil
	}
	wait.Every(ctx, r.interval, func(ctx context.Context) {
		if err := r.s.journal.flush(ctx); err != nil {
			background.Report(ctx, err)
		}
	})
	fctx, cancel := background.Finish(ctx, 5*time.Second)
	defer cancel()
	if err := r.s.journal.flush(fctx); err != nil {
		background.Report(ctx, err)
	}
	return nil
}

// FlushRoomJournal writes the buffered joins now (tests, and a shutdown without the service).
func (s *Service) FlushRoomJournal(ctx context.Context) error {
	if s.journal == nil {
		return nil
	}
	return s.journal.flush(ctx)
}

// restoreRooms restores the room of sale from the journal into the engine (Recover, for an
// engine that lost every room: the memory engine's restart).
func (s *Service) restoreRoom(ctx context.Context, sale seckill.Sale) error {
	r, ok := s.rooms.(seckill.RoomRestorer)
	if s.journal == nil || !ok || sale.Room == nil {
		return nil
	}
	es, adm, err := s.RoomJournal(ctx, sale)
	if err != nil || (len(es) == 0 && adm.Count == 0) {
		return err
	}
	return r.RestoreRoom(ctx, sale, es, adm)
}

// RoomJournal reads the sale's room from the journal, with the draw keys of its drawn
// entrants computed from the seed: what RestoreRoom takes (an engine that restores a room by
// itself, the Redis engine's rebuild, is given this).
func (s *Service) RoomJournal(ctx context.Context, sale seckill.Sale) ([]seckill.RestoredEntrant, seckill.RoomAdmissions, error) {
	if s.journal == nil || sale.Room == nil {
		return nil, seckill.RoomAdmissions{}, nil
	}
	es, err := s.journal.j.RoomEntrants(ctx, sale.ID, sale.Incarnation)
	if err != nil {
		return nil, seckill.RoomAdmissions{}, err
	}
	adm, err := s.journal.j.RoomAdmitted(ctx, sale.ID, sale.Incarnation)
	if err != nil {
		return nil, seckill.RoomAdmissions{}, err
	}
	seed := s.roomSeed(sale)
	out := make([]seckill.RestoredEntrant, len(es))
	for i, e := range es {
		out[i] = seckill.RestoredEntrant{RoomEntrant: e}
		if e.Drawn {
			out[i].DrawKey = seckill.DrawKey(seed, e.Entrant)
		}
	}
	return out, adm, nil
}

// incarnation is the stored sale's incarnation, cached per sale for the list's TTL (a sale
// deleted and made again under its id is seen as new at most that late): from the cached list
// of definitions, else from the store (a sale made a moment ago on another instance).
func (s *Service) incarnation(ctx context.Context, saleID string) (string, error) {
	type entry struct {
		inc string
		at  time.Time
	}
	if v, ok := s.incarnations.Load(saleID); ok && time.Since(v.(entry).at) < s.list.ttl {
		return v.(entry).inc, nil
	}
	inc, found := "", false
	if defs, err := s.list.definitions(ctx, s.store); err == nil {
		for _, d := range defs {
			if d.ID == saleID {
				inc, found = d.Incarnation, true
				break
			}
		}
	}
	if !found {
		d, _, err := s.store.Sale(ctx, saleID)
		if err != nil {
			return "", err
		}
		inc = d.Incarnation
	}
	s.incarnations.Store(saleID, entry{inc, time.Now()})
	return inc, nil
}
