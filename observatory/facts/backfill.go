package facts

import (
	"context"
	"fmt"

	"github.com/quiver-quic/quiver/observatory/store"
)

// Backfill adds the typed facts of stored results that have none yet
// (results recorded before the store kept facts), read from their
// evidence. It returns how many results got facts.
func Backfill(ctx context.Context, st store.Store) (int, error) {
	n := 0
	var after int64
	for {
		recs, err := st.ResultsWithoutFacts(ctx, after, 200)
		if err != nil {
			return n, err
		}
		if len(recs) == 0 {
			return n, nil
		}
		for _, r := range recs {
			after = r.ID
			fs, err := FromEvidence(r.Evidence)
			if err != nil {
				return n, fmt.Errorf("result %d: %w", r.ID, err)
			}
			if len(fs) == 0 {
				continue
			}
			if err := st.AddFacts(ctx, r.ID, fs); err != nil {
				return n, err
			}
			n++
		}
	}
}
