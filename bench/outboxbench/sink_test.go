package outboxbench

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSinkArrivalsInArrivalOrder(t *testing.T) {
	s := &sink{arrivals: map[string]int64{}, commits: map[string]int64{}}
	for _, id := range []string{"a", "b", "a", "c"} {
		req := httptest.NewRequest(http.MethodPost, "/events", strings.NewReader("{}"))
		req.Header.Set("X-Message-Id", id)
		s.event(httptest.NewRecorder(), req)
	}
	s.arrivals["b"] = s.arrivals["a"] - 1 // b first, then a, then c

	rec := httptest.NewRecorder()
	s.arrivalList(rec, httptest.NewRequest(http.MethodGet, "/arrivals", nil))
	var list []Arrival
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list {
		ids = append(ids, a.ID)
	}
	if got := strings.Join(ids, ","); got != "b,a,c" {
		t.Errorf("arrivals = %s, want b,a,c", got)
	}
	if s.requests != 4 || s.duplicates != 1 {
		t.Errorf("requests %d, duplicates %d, want 4 and 1", s.requests, s.duplicates)
	}
}
