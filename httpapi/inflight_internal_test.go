package httpapi

// InFlightNow is the number of requests the instance-wide in-flight bound counts now: those
// whose handler runs. Tests only (package httpapi_test sees it through this file): a test
// that holds slots with slow requests waits on it until the server has taken them, since a
// request of its own to find out would be counted too, and race them for the slots.
func (s *Server) InFlightNow() int64 { return s.inFlight.n.Load() }
