package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count such as 100MB (10^8), 1GiB (2^30), 64KiB or
// 5000. Decimal units follow the study's convention for rates.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"B", 1}} {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) && (u.suffix != "B" || !strings.ContainsAny(t[:len(t)-1], "KMGkmgi")) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional unit (KB, MB, GB, KiB, MiB, GiB)", s)
	}
	return int64(f * float64(mult)), nil
}
