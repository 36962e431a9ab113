package httpapi

import (
	"net/http"

	"github.com/seckill-go/seckill"
)

// SaleUpdateBody is the body of PATCH /api/v1/sales/{id}: the one field of a sale an admin may
// change this way.
type SaleUpdateBody struct {
	Listed *bool `json:"listed"`
}

// updateSale lists a sale on the storefront or takes it off.
func (s *Server) updateSale(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	var in SaleUpdateBody
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Listed == nil {
		return seckill.Errorf(seckill.CodeInvalidArgument, "listed (true or false) is required")
	}
	v, err := s.svc.SetListed(r.Context(), r.PathValue("id"), *in.Listed)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// deleteSale deletes a sale nobody has reserved in (service.Service.DeleteSale).
func (s *Server) deleteSale(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	if err := s.svc.DeleteSale(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listedOnly reads the list's ?all: absent or false, the storefront's list (listed sales);
// true, every sale, for admins only (the dashboard).
func (s *Server) listedOnly(r *http.Request) (bool, error) {
	switch r.URL.Query().Get("all") {
	case "", "false":
		return true, nil
	case "true":
		if err := s.checkAdmin(r); err != nil {
			return false, err
		}
		return false, nil
	}
	return false, seckill.Errorf(seckill.CodeInvalidArgument, "all must be true or false")
}
