package httpapi

import (
	"net/http"
)

// HotListed bounds the hot sales GET /api/v1/hot names: the first ones in the sale list's order
// (start time, then id). The count is always whole.
const HotListed = 100

// ColdView is what the engine's cold side holds and did on this instance (docs/MODEL.md "Hot
// and cold sales"), for GET /api/v1/hot. The Redis engine has one (redisinv.Engine.ColdStats);
// the memory engine has none, and the answer then carries zeros.
type ColdView struct {
	Entries int    // cold sales in this instance's cold cache now
	Max     int    // the cache's bound (redisinv.ColdCacheMax)
	Cooled  uint64 // sales this instance cooled (their keys removed) since it started
	Loaded  uint64 // sales this instance loaded from the database with nothing lost (preheated, or cold ones changed again) since it started
}

// hotAnswer is the answer of GET /api/v1/hot.
type hotAnswer struct {
	Hot       int       `json:"hot"`
	Sales     []string  `json:"sales"`
	ColdCache coldCache `json:"cold_cache"`
	Cooled    uint64    `json:"cooled"`
	Loaded    uint64    `json:"loaded"`
}

type coldCache struct {
	Entries int `json:"entries"`
	Max     int `json:"max"`
}

// hotStatus is GET /api/v1/hot (admin): this instance's view of the hot and cold sales, for
// the dashboard: how many sales are hot now (service.LiveSaleIDs) and the first HotListed of
// them, and what the cold cache holds (Config.Cold; zeros without one).
func (s *Server) hotStatus(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	ids, err := s.svc.LiveSaleIDs(r.Context())
	if err != nil {
		return err
	}
	var cold ColdView
	if s.cfg.Cold != nil {
		cold = s.cfg.Cold()
	}
	return writeJSON(w, http.StatusOK, hotAnswer{
		Hot: len(ids), Sales: append([]string{}, ids[:min(len(ids), HotListed)]...),
		ColdCache: coldCache{Entries: cold.Entries, Max: cold.Max}, Cooled: cold.Cooled, Loaded: cold.Loaded,
	})
}
