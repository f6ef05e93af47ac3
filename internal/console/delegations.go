package console

import (
	"net/http"
	"strconv"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
)

// serveDelegations answers GET /api/delegations[?limit=N], newest first.
func (s *Console) serveDelegations(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, "limit must be a positive integer, got "+strconv.Quote(v))
			return
		}
		limit = min(n, observe.RecentDelegations)
	}
	mcphttp.WriteJSON(w, http.StatusOK, s.Delegations.Recent(limit))
}
