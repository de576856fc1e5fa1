package migrate

import (
	"slices"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/store"
)

// interpret compares the history rows with the bundled files, the way Flyway reads its own
// table: rows in installed_rank order; a successful row applies its version; a successful
// BASELINE row applies every version up to its own; a DELETE or UNDO row takes its version
// back; a row without a version (SCHEMA, repeatable migrations) counts for nothing.
func interpret(list []migrations.Migration, rows []store.HistoryRow) Status {
	st := Status{HasHistory: len(rows) > 0}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b store.HistoryRow) int { return a.InstalledRank - b.InstalledRank })
	applied := map[int]bool{}
	unknown := map[string]bool{}
	baseline := 0
	for i := range sorted {
		row := sorted[i]
		if row.Version == "" {
			continue
		}
		v, ok := parseVersion(row.Version)
		typ := strings.ToUpper(row.Type)
		switch {
		case typ == "DELETE" || strings.HasPrefix(typ, "UNDO"):
			if ok {
				delete(applied, v)
			}
			delete(unknown, row.Version)
		case !row.Success:
			if st.failed == nil {
				st.failed = &sorted[i]
			}
		case !ok || v > len(list):
			unknown[row.Version] = true
		case typ == "BASELINE":
			applied[v] = true
			baseline = max(baseline, v)
		default:
			applied[v] = true
		}
	}
	for _, m := range list {
		if applied[m.Version] || m.Version <= baseline {
			st.Applied = append(st.Applied, m.Version)
			st.Current = m.Version
		}
	}
	for _, m := range list {
		if !applied[m.Version] && m.Version > baseline {
			st.Pending = append(st.Pending, m.Version)
			if m.Version < st.Current && st.outOfOrder == 0 {
				st.outOfOrder = m.Version
			}
		}
	}
	for v := range unknown {
		st.Unknown = append(st.Unknown, v)
	}
	slices.Sort(st.Unknown)
	return st
}

// parseVersion reads a Flyway version that names a whole number: "11", "011", "11.0".
func parseVersion(s string) (int, bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	v, err := strconv.Atoi(parts[0])
	if err != nil || v < 0 {
		return 0, false
	}
	for _, p := range parts[1:] {
		if strings.Trim(p, "0") != "" || p == "" {
			return 0, false
		}
	}
	return v, true
}
