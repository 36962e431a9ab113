package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// The waiting room's endpoints (docs/API.md "The waiting room"): the room's public view and its
// draw's entrants, and a buyer's join, proof-of-work challenge, ticket and live ticket stream
// (roomevents.go). GET /api/v1/sales/{id}/path takes the admission token in the header
// AdmissionHeader.

// AdmissionHeader carries the admission token to GET /api/v1/sales/{id}/path.
const AdmissionHeader = "Seckill-Admission"

// maxProofField bounds a join's pow.challenge and pow.solution.
const maxProofField = 256

// roomSaleID is the path's sale id, refused at the edge (not_found, like an unknown sale) when
// it cannot be one.
func roomSaleID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !seckill.ValidID(id) {
		return "", seckill.Errorf(seckill.CodeNotFound, "no such sale")
	}
	return id, nil
}

// roomView answers the room to anyone, cacheable for a second like the sale (cache.go): its
// ETag is of the answer without server_time.
func (s *Server) roomView(w http.ResponseWriter, r *http.Request) error {
	id, err := roomSaleID(r)
	if err != nil {
		return err
	}
	v, err := s.svc.RoomView(r.Context(), id)
	if err != nil {
		return err
	}
	b, unclocked, err := renderUnclocked(&v, &v.ServerTime)
	if err != nil {
		return fmt.Errorf("render answer: %w", err)
	}
	writeCacheable(w, r, b, unclocked)
	return nil
}

// JoinBody is the body of POST /api/v1/sales/{id}/waiting-room/join; empty means no proof.
type JoinBody struct {
	Pow *service.RoomProof `json:"pow"`
}

// joinRoom puts the signed-in buyer in the room, within the buyer's and the address's budgets
// of joins (ratelimit.go: shared across instances on Redis), decided before the body is read.
func (s *Server) joinRoom(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	id, err := roomSaleID(r)
	if err != nil {
		return err
	}
	if _, err := s.rates.spend(r, scopeJoin, user, s.now()); err != nil {
		return err
	}
	var in JoinBody
	if err := decodeBody(w, r, &in, true); err != nil {
		return err
	}
	if in.Pow != nil && (in.Pow.Challenge == "" || in.Pow.Solution == "" || len(in.Pow.Challenge) > maxProofField || len(in.Pow.Solution) > maxProofField) {
		return seckill.Errorf(seckill.CodeInvalidArgument, "pow needs a challenge and a solution, each 1 to %d bytes", maxProofField)
	}
	t, err := s.svc.JoinRoom(r.Context(), id, user, in.Pow)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t)
}

// roomChallenge hands the signed-in buyer a proof-of-work challenge for joining.
func (s *Server) roomChallenge(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	id, err := roomSaleID(r)
	if err != nil {
		return err
	}
	c, err := s.svc.Challenge(r.Context(), id, user)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, c)
}

// roomTicket answers the signed-in buyer's ticket (with the admission token while it lasts:
// never cached).
func (s *Server) roomTicket(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	id, err := roomSaleID(r)
	if err != nil {
		return err
	}
	t, err := s.svc.RoomTicket(r.Context(), id, user)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, t)
}

// entrantsAnswer is the body of GET /api/v1/sales/{id}/waiting-room/entrants.
type entrantsAnswer struct {
	Entrants []string `json:"entrants"`
	// Next is the after= of the next page, absent on the last.
	Next string `json:"next,omitempty"`
}

// roomEntrants answers a page of the draw's entrants, once the sale has started. The list
// never changes then, so a page may be cached as the sale is.
func (s *Server) roomEntrants(w http.ResponseWriter, r *http.Request) error {
	id, err := roomSaleID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit := service.MaxEntrantsPage
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > service.MaxEntrantsPage {
			return seckill.Errorf(seckill.CodeInvalidArgument, "limit must be 1 to %d", service.MaxEntrantsPage)
		}
		limit = n
	}
	ids, next, err := s.svc.RoomEntrants(r.Context(), id, q.Get("after"), limit)
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []string{}
	}
	w.Header().Set("Cache-Control", cachePublic)
	return writeJSON(w, http.StatusOK, entrantsAnswer{Entrants: ids, Next: next})
}
