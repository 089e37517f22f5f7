package recovery

import "time"

// epoch is the fixed start of every test clock.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns epoch + d.
func at(d time.Duration) time.Time { return epoch.Add(d) }

const ms = time.Millisecond
