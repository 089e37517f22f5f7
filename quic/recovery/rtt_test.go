package recovery

import (
	"testing"
	"time"
)

func TestRTTSamples(t *testing.T) {
	type sample struct {
		latest, ackDelay, maxAckDelay time.Duration
		confirmed                     bool
	}
	tests := []struct {
		name                       string
		samples                    []sample
		smoothed, rttvar, min, lat time.Duration
	}{
		{
			// "smoothed_rtt = latest_rtt; rttvar = latest_rtt / 2"
			name:     "first sample",
			samples:  []sample{{100 * ms, 30 * ms, 25 * ms, true}},
			smoothed: 100 * ms, rttvar: 50 * ms, min: 100 * ms, lat: 100 * ms,
		},
		{
			// adjusted = 200 - 20; rttvar = 3/4*50 + 1/4*|100-180| = 57.5;
			// smoothed = 7/8*100 + 1/8*180 = 110.
			name:     "second sample with ack delay",
			samples:  []sample{{100 * ms, 0, 25 * ms, true}, {200 * ms, 20 * ms, 25 * ms, true}},
			smoothed: 110 * ms, rttvar: 57500 * time.Microsecond, min: 100 * ms, lat: 200 * ms,
		},
		{
			// ack_delay 50 clamped to max_ack_delay 25: adjusted 175.
			// rttvar = (150 + 75)/4 = 56.25, smoothed = (700+175)/8 = 109.375
			name:     "ack delay clamped after confirmation",
			samples:  []sample{{100 * ms, 0, 25 * ms, true}, {200 * ms, 50 * ms, 25 * ms, true}},
			smoothed: 109375 * time.Microsecond, rttvar: 56250 * time.Microsecond, min: 100 * ms, lat: 200 * ms,
		},
		{
			// Before confirmation max_ack_delay is ignored: adjusted 150.
			// rttvar = (150+50)/4 = 50, smoothed = (700+150)/8 = 106.25
			name:     "ack delay not clamped before confirmation",
			samples:  []sample{{100 * ms, 0, 25 * ms, false}, {200 * ms, 50 * ms, 25 * ms, false}},
			smoothed: 106250 * time.Microsecond, rttvar: 50 * ms, min: 100 * ms, lat: 200 * ms,
		},
		{
			// 110 < min_rtt + ack_delay = 120: not subtracted.
			// rttvar = (150+10)/4 = 40, smoothed = (700+110)/8 = 101.25
			name:     "ack delay below min_rtt ignored",
			samples:  []sample{{100 * ms, 0, 25 * ms, true}, {110 * ms, 20 * ms, 25 * ms, true}},
			smoothed: 101250 * time.Microsecond, rttvar: 40 * ms, min: 100 * ms, lat: 110 * ms,
		},
		{
			name:     "min_rtt follows lower samples",
			samples:  []sample{{100 * ms, 0, 25 * ms, true}, {80 * ms, 0, 25 * ms, true}},
			smoothed: 97500 * time.Microsecond, rttvar: 42500 * time.Microsecond, min: 80 * ms, lat: 80 * ms,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRTT(0)
			for i, s := range tt.samples {
				r.Update(s.latest, s.ackDelay, s.maxAckDelay, s.confirmed, at(time.Duration(i)*time.Second))
			}
			if r.Smoothed() != tt.smoothed || r.RTTVar() != tt.rttvar || r.Min() != tt.min || r.Latest() != tt.lat {
				t.Errorf("smoothed %v rttvar %v min %v latest %v; want %v %v %v %v",
					r.Smoothed(), r.RTTVar(), r.Min(), r.Latest(), tt.smoothed, tt.rttvar, tt.min, tt.lat)
			}
			if r.FirstSampleTime() != epoch {
				t.Errorf("first sample at %v, want epoch", r.FirstSampleTime())
			}
		})
	}
}

func TestRTTDerived(t *testing.T) {
	r := NewRTT(0)
	if r.HasSample() {
		t.Fatal("fresh estimator has a sample")
	}
	// "This results in handshakes starting with a PTO of 1 second":
	// 333 + 4*166.5 = 999 ms.
	if got := r.PTO(0); got != 999*ms {
		t.Errorf("initial PTO = %v, want 999ms", got)
	}
	r.Update(100*ms, 0, 0, false, epoch)
	if got := r.PTO(25 * ms); got != 325*ms {
		t.Errorf("PTO = %v, want 100+200+25", got)
	}
	if got := r.PersistentCongestionDuration(25 * ms); got != 975*ms {
		t.Errorf("persistent congestion duration = %v, want 3*325ms", got)
	}
	if got := r.LossDelay(); got != 112500*time.Microsecond {
		t.Errorf("loss delay = %v, want 9/8*100ms", got)
	}
	// The PTO is at least kGranularity above smoothed_rtt.
	r.Reset(10 * time.Microsecond)
	r.Update(10*time.Microsecond, 0, 0, false, epoch)
	r.Update(10*time.Microsecond, 0, 0, false, epoch)
	if got := r.PTO(0); got < Granularity {
		t.Errorf("PTO %v below kGranularity", got)
	}
	if got := r.LossDelay(); got != Granularity {
		t.Errorf("loss delay %v, want kGranularity", got)
	}
}
