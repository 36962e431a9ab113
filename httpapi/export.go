package httpapi

import (
	"net/http"

	"github.com/seckill-go/seckill/delivery"
)

// exportStatus is GET /api/v1/export (admin): where each sink of the event export stands on
// this instance (docs/EVENTS.md, Operations), for the dashboard. Without an export configured
// the list is empty.
func (s *Server) exportStatus(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	sinks := []delivery.SinkStatus{}
	if s.cfg.Export != nil {
		sinks = append(sinks, s.cfg.Export()...)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"sinks": sinks})
}

// exportBehind names the sinks that are far behind, for /readyz (reported, never failing it).
func (s *Server) exportBehind() []string {
	var out []string
	if s.cfg.Export == nil {
		return nil
	}
	for _, st := range s.cfg.Export() {
		if st.FarBehind {
			out = append(out, st.Name) // /readyz is anonymous: the name, never the URL
		}
	}
	return out
}
