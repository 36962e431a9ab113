// The waiting rooms (seckill.WaitingRooms; docs/DECISIONS.md "Waiting rooms on Redis"): one
// Lua script per operation (lua/room_*.lua, with room_common.lua), on five keys of the sale's
// own hash tag next to its eight, so that each runs atomically on the sale's node of a Cluster
// and reads the sale's hash (its window, its stock, its clock) in the same step. A room changes
// nothing of its sale: its scripts read the sale's hash and never write it, so they raise no
// version and wake no sweep; they answer a missing sale as the sale's own calls do (exec).

package redisinv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
)

var (
	_ seckill.WaitingRooms = (*Engine)(nil)
	_ seckill.RoomTeller   = (*Engine)(nil)
)

// roomParts are the suffixes of a room's keys after the sale's, in the order of room_common.lua's
// KEYS[2..6] (and prelude.lua's ROOM_PARTS).
var roomParts = [...]string{"room", "rwait", "rpre", "rent", "ract"}

// MaxRoomEntrants is seckill.MaxRoomEntrants (each entrant costs about 200 bytes of Redis). One
// Admit admits at most seckill.RoomAdmitBatch and a page of DrawEntrants holds at most
// seckill.MaxDrawEntrantsPage ids (bounded work).
const MaxRoomEntrants = seckill.MaxRoomEntrants

// maxDrawAfter bounds DrawEntrants' after (an entrant id has 32 bytes).
const maxDrawAfter = 1024

// roomKeys returns the room's six keys: the sale's hash, then roomParts (room_common.lua).
func (e *Engine) roomKeys(saleID string) []string {
	base := e.prefix + "{sale:" + saleID + "}:"
	ks := make([]string, 1+len(roomParts))
	ks[0] = base + "sale"
	for i, p := range roomParts {
		ks[i+1] = base + p
	}
	return ks
}

// roomScriptSet is the room's scripts.
type roomScriptSet struct {
	join, ticket, admit, release, state, draw, restore, tell *script
}

var defaultRoomScripts = newRoomScriptSet(scriptSource)

// newRoomScriptSet builds the room's scripts from source(name).
func newRoomScriptSet(source func(name string) string) *roomScriptSet {
	load := func(name string) *script {
		src := source(name + ".lua")
		read := name == "room_ticket" || name == "room_state" || name == "room_draw"
		return &script{name: name, src: src, lua: rueidis.NewLuaScript(src), read: read, room: true}
	}
	return &roomScriptSet{
		join: load("room_join"), ticket: load("room_ticket"), admit: load("room_admit"),
		release: load("room_release"), state: load("room_state"), draw: load("room_draw"),
		restore: load("room_restore"), tell: load("room_tell"),
	}
}

// rooms is the engine's room scripts.
func (e *Engine) rooms() *roomScriptSet {
	if e.roomScripts != nil {
		return e.roomScripts
	}
	return defaultRoomScripts
}

// roomField is a room policy as load.lua's ARGV[24] and the sale hash's field room take it:
// "<order>,<opens s>,<admit/s>,<max active>,<token s>,<pow bits>", empty for none.
func roomField(p *seckill.RoomPolicy) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%s,%d,%d,%d,%d,%d", p.Order, p.OpensSeconds, p.AdmitPerSecond, p.MaxActive, p.TokenSeconds, p.PowBits)
}

// parseRoom reads roomField's form back; nil for an empty one (or a form it does not know,
// which load.lua never stores).
func parseRoom(s string) *seckill.RoomPolicy {
	if s == "" {
		return nil
	}
	f := strings.Split(s, ",")
	if len(f) != 6 {
		return nil
	}
	var n [5]int
	for i := range n {
		v, err := strconv.Atoi(f[i+1])
		if err != nil {
			return nil
		}
		n[i] = v
	}
	return &seckill.RoomPolicy{Order: f[0], OpensSeconds: n[0], AdmitPerSecond: n[1], MaxActive: n[2], TokenSeconds: n[3], PowBits: n[4]}
}

// cloneRoom is a copy of p, so that callers never share a policy.
func cloneRoom(p *seckill.RoomPolicy) *seckill.RoomPolicy {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// execRoom runs a room script for the sale, with args after the clock, through the engine's one
// door (call.go exec): the room's keys, the version check, a missing sale rebuilt or answered
// cold as urgencyOf and coldAnswers say for the script, the replicas awaited unless it only
// reads. Then the room's own codes.
func (e *Engine) execRoom(ctx context.Context, s *script, saleID string, args ...string) (reply, error) {
	r, err := e.exec(ctx, s, saleID, args...)
	if err != nil {
		return nil, err
	}
	if r.code() == "restoring" { // room_restore.lua is rebuilding the room: a moment
		return nil, seckill.Errorf(seckill.CodeUnavailable, "the waiting room of sale %q is being restored from the database; retry shortly", saleID)
	}
	if r.code() == "segmented" {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "sale %q is split in segments and has no waiting room", saleID)
	}
	return r, nil
}

// ticketOf decodes a ticket reply (room_common.lua ticket_reply).
func ticketOf(entrant string, r reply) seckill.Ticket {
	t := seckill.Ticket{
		Entrant: entrant, State: r.str(1), Index: r.int(2), Ahead: r.int(3), Drawn: r.int(4) == 1,
		JoinedAt: fromMillis(r.int(5)), Arrival: r.int(8),
	}
	if t.State == seckill.TicketAdmitted {
		t.AdmittedAt, t.ActiveUntil = fromMillis(r.int(6)), fromMillis(r.int(7))
	}
	return t
}

// roomStateOf decodes a counts reply (room_common.lua room_counts).
func roomStateOf(r reply) seckill.RoomState {
	st := seckill.RoomState{Entrants: r.int(1), PreQueue: r.int(2), Admitted: r.int(3), Waiting: r.int(4),
		Active: r.int(5), Closed: r.str(6)}
	if at := r.int(7); st.Closed != "" && at > 0 {
		st.ClosedAt = fromMillis(at)
	}
	return st
}

func errNoRoom(saleID string) error {
	return seckill.Errorf(seckill.CodeInvalidArgument, "sale %q has no waiting room", saleID)
}

func errEntrant() error {
	return seckill.Errorf(seckill.CodeInvalidArgument, "an entrant id is 32 lower-case hex digits")
}

// Join is seckill.WaitingRooms.Join. The room's policy is the loaded sale's (its hash's field
// room), as the memory engine takes it from its own copy of the definition: sale serves for its
// id only.
//
// room_join.lua: KEYS the room's six; ARGV [1] clock, [2] entrant, [3] draw key (empty when out of
// range), [4] MaxRoomEntrants. Reply a ticket, {'ended'}, {'not_started'}, {'full'},
// {'no_room'}, {'bad_key'}.
func (e *Engine) Join(ctx context.Context, sale seckill.Sale, entrant string, drawKey uint64) (seckill.Ticket, error) {
	if !seckill.ValidEntrant(entrant) {
		return seckill.Ticket{}, errEntrant()
	}
	if !seckill.ValidID(sale.ID) {
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", sale.ID)
	}
	key := ""
	if drawKey < 1<<48 {
		key = strconv.FormatUint(drawKey, 10)
	}
	r, err := e.execRoom(ctx, e.rooms().join, sale.ID, entrant, key, itoa(MaxRoomEntrants))
	if err != nil { // a cold sale was answered by its window (rebuild.go missing)
		return seckill.Ticket{}, err
	}
	switch r.code() {
	case "ok":
		return ticketOf(entrant, r), nil
	case "not_started":
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeNotStarted, "sale %q: its waiting room has not opened yet", sale.ID)
	case "ended":
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeEnded, "sale %q has ended", sale.ID)
	case "full":
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeQueueFull, "sale %q: its waiting room is full (%d entrants)", sale.ID, MaxRoomEntrants)
	case "no_room":
		return seckill.Ticket{}, errNoRoom(sale.ID)
	case "bad_key":
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeInvalidArgument, "a draw key is below 2^48 (seckill.DrawKey)")
	}
	return seckill.Ticket{}, unexpected("room_join", r)
}

// Ticket is seckill.WaitingRooms.Ticket.
//
// room_ticket.lua: KEYS the room's six; ARGV [1] clock, [2] entrant. Reply a ticket or
// {'not_found'}.
func (e *Engine) Ticket(ctx context.Context, saleID, entrant string) (seckill.Ticket, error) {
	notFound := seckill.Errorf(seckill.CodeNotFound, "no ticket for this entrant in sale %q", saleID)
	if !seckill.ValidID(saleID) {
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	if !seckill.ValidEntrant(entrant) { // never joined; but an unknown sale is not_found first
		if _, err := e.Room(ctx, saleID); err != nil {
			return seckill.Ticket{}, err
		}
		return seckill.Ticket{}, notFound
	}
	r, err := e.execRoom(ctx, e.rooms().ticket, saleID, entrant)
	if asCold(err) != nil {
		return seckill.Ticket{}, notFound // a cold sale's room is gone with its keys (cool.lua)
	}
	if err != nil {
		return seckill.Ticket{}, err
	}
	switch r.code() {
	case "ok":
		return ticketOf(entrant, r), nil
	case "not_found":
		return seckill.Ticket{}, notFound
	}
	return seckill.Ticket{}, unexpected("room_ticket", r)
}

// Admit is seckill.WaitingRooms.Admit, with the loaded sale's policy (as Join). It admits at
// most seckill.RoomAdmitBatch per call, and tells every admission.
func (e *Engine) Admit(ctx context.Context, sale seckill.Sale) (seckill.RoomState, error) {
	st, _, err := e.admit(ctx, sale, true)
	return st, err
}

// AdmitUntold is seckill.RoomTeller.AdmitUntold.
func (e *Engine) AdmitUntold(ctx context.Context, sale seckill.Sale) (seckill.RoomState, seckill.UntoldAdmissions, error) {
	return e.admit(ctx, sale, false)
}

// admit is Admit (tell) and AdmitUntold.
//
// room_admit.lua: KEYS the room's six; ARGV [1] clock, [2] seckill.RoomAdmitBatch, [3] tell (1/0).
// Reply the counts, the first untold index and the untold entrants (4 values each), or
// {'no_room'}.
func (e *Engine) admit(ctx context.Context, sale seckill.Sale, tell bool) (seckill.RoomState, seckill.UntoldAdmissions, error) {
	if !seckill.ValidID(sale.ID) {
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", sale.ID)
	}
	r, err := e.execRoom(ctx, e.rooms().admit, sale.ID, itoa(seckill.RoomAdmitBatch), boolArg(tell))
	if asCold(err) != nil {
		// outside its hot window: nobody to admit, its room gone
		return seckill.RoomState{}, seckill.UntoldAdmissions{First: 1}, nil
	}
	if err != nil {
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, err
	}
	switch r.code() {
	case "ok":
	case "no_room":
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, errNoRoom(sale.ID)
	default:
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, unexpected("room_admit", r)
	}
	if len(r) < 10 {
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, unexpected("room_admit", r)
	}
	u := seckill.UntoldAdmissions{First: r.int(8)}
	flat, err := r[9].ToArray()
	if err != nil || len(flat)%4 != 0 {
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, unexpected("room_admit", r)
	}
	for i := 0; i < len(flat); i += 4 {
		f := reply(flat[i : i+4])
		u.Entrants = append(u.Entrants, seckill.RoomEntrant{SaleID: sale.ID, Entrant: f.str(0), JoinedAt: fromMillis(f.int(1)),
			Drawn: f.int(2) == 1, Arrival: f.int(3)})
	}
	return roomStateOf(r), u, nil
}

// TellAdmitted is seckill.RoomTeller.TellAdmitted.
//
// room_tell.lua: KEYS the room's six; ARGV [1] clock, [2] n. Reply {'ok', told} or {'no_room'}.
func (e *Engine) TellAdmitted(ctx context.Context, saleID string, n int64) error {
	if !seckill.ValidID(saleID) {
		return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	r, err := e.execRoom(ctx, e.rooms().tell, saleID, i64toa(min(max(n, 0), seckill.MaxQuantity)))
	if asCold(err) != nil {
		return nil // its room is gone with its keys
	}
	if err != nil {
		return err
	}
	switch r.code() {
	case "ok":
		return nil
	case "no_room":
		return errNoRoom(saleID)
	}
	return unexpected("room_tell", r)
}

// Release is seckill.WaitingRooms.Release.
//
// room_release.lua: KEYS the room's six; ARGV [1] clock, [2] entrant, [3] until (ms). Reply
// {'ok', changed}.
func (e *Engine) Release(ctx context.Context, saleID, entrant string, until time.Time) error {
	if !seckill.ValidID(saleID) {
		return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	if !seckill.ValidEntrant(entrant) { // not admitted: nothing to do, once the sale is known
		_, err := e.Room(ctx, saleID)
		return err
	}
	ms := min(max(until.UnixMilli(), 0), 1<<53) // a zero time is "now": before every clock
	r, err := e.execRoom(ctx, e.rooms().release, saleID, entrant, i64toa(ms))
	if asCold(err) != nil {
		return nil // its room is gone with its keys: nothing counts any more
	}
	if err != nil {
		return err
	}
	if r.code() != "ok" {
		return unexpected("room_release", r)
	}
	return nil
}

// Room is seckill.WaitingRooms.Room.
//
// room_state.lua: KEYS the room's six; ARGV [1] clock. Reply the counts.
func (e *Engine) Room(ctx context.Context, saleID string) (seckill.RoomState, error) {
	if !seckill.ValidID(saleID) {
		return seckill.RoomState{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	r, err := e.execRoom(ctx, e.rooms().state, saleID)
	if asCold(err) != nil {
		return seckill.RoomState{}, nil
	}
	if err != nil {
		return seckill.RoomState{}, err
	}
	if r.code() != "ok" {
		return seckill.RoomState{}, unexpected("room_state", r)
	}
	return roomStateOf(r), nil
}

// DrawEntrants is seckill.WaitingRooms.DrawEntrants; limit is 1 to seckill.MaxDrawEntrantsPage.
//
// room_draw.lua: KEYS the room's six; ARGV [1] clock, [2] after (empty, or the last id of the page
// before), [3] limit. Reply {'ok', {entrant...}}.
func (e *Engine) DrawEntrants(ctx context.Context, saleID, after string, limit int) ([]string, error) {
	switch {
	case limit < 1 || limit > seckill.MaxDrawEntrantsPage:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "limit must be 1 to %d", seckill.MaxDrawEntrantsPage)
	case len(after) > maxDrawAfter:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "after is at most %d bytes", maxDrawAfter)
	case !seckill.ValidID(saleID):
		return nil, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	r, err := e.execRoom(ctx, e.rooms().draw, saleID, after, itoa(limit))
	if asCold(err) != nil {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	if r.code() != "ok" || len(r) < 2 {
		return nil, unexpected("room_draw", r)
	}
	ids, err := r[1].AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redisinv: room_draw script: %w", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}
