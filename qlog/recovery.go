package qlog

import (
	"encoding/json"
	"time"
)

// MetricFields selects the members a MetricsUpdated event carries. Engines
// usually log only what changed, which keeps qvis graphs and files small.
type MetricFields uint16

// Metric fields.
const (
	MetricMinRTT MetricFields = 1 << iota
	MetricSmoothedRTT
	MetricLatestRTT
	MetricRTTVariance
	MetricPTOCount
	MetricCongestionWindow
	MetricBytesInFlight
	MetricSSThresh
	MetricPacketsInFlight
	MetricPacingRate

	// MetricAll selects every member.
	MetricAll MetricFields = 1<<iota - 1
)

// MetricsUpdated carries RTT and congestion-control state; qvis draws its
// congestion graph from it.
type MetricsUpdated struct {
	// Fields selects the members written; zero means MetricAll.
	Fields MetricFields

	MinRTT           time.Duration
	SmoothedRTT      time.Duration
	LatestRTT        time.Duration
	RTTVariance      time.Duration
	PTOCount         uint64
	CongestionWindow uint64
	BytesInFlight    uint64
	SSThresh         uint64
	PacketsInFlight  uint64
	// PacingRate is in bits per second.
	PacingRate uint64
}

// Name returns NameMetricsUpdated.
func (MetricsUpdated) Name() string { return NameMetricsUpdated }

// AppendData appends the selected members.
func (ev MetricsUpdated) AppendData(b []byte) []byte {
	f := ev.Fields
	if f == 0 {
		f = MetricAll
	}
	e := enc{b: b}
	e.open()
	if f&MetricMinRTT != 0 {
		e.ms("min_rtt", ev.MinRTT)
	}
	if f&MetricSmoothedRTT != 0 {
		e.ms("smoothed_rtt", ev.SmoothedRTT)
	}
	if f&MetricLatestRTT != 0 {
		e.ms("latest_rtt", ev.LatestRTT)
	}
	if f&MetricRTTVariance != 0 {
		e.ms("rtt_variance", ev.RTTVariance)
	}
	if f&MetricPTOCount != 0 {
		e.uint("pto_count", ev.PTOCount)
	}
	if f&MetricCongestionWindow != 0 {
		e.uint("congestion_window", ev.CongestionWindow)
	}
	if f&MetricBytesInFlight != 0 {
		e.uint("bytes_in_flight", ev.BytesInFlight)
	}
	if f&MetricSSThresh != 0 {
		e.uint("ssthresh", ev.SSThresh)
	}
	if f&MetricPacketsInFlight != 0 {
		e.uint("packets_in_flight", ev.PacketsInFlight)
	}
	if f&MetricPacingRate != 0 {
		e.uint("pacing_rate", ev.PacingRate)
	}
	e.close()
	return e.b
}

// UnmarshalJSON decodes the members present and sets Fields to match them.
func (ev *MetricsUpdated) UnmarshalJSON(b []byte) error {
	var aux struct {
		MinRTT           *msField `json:"min_rtt"`
		SmoothedRTT      *msField `json:"smoothed_rtt"`
		LatestRTT        *msField `json:"latest_rtt"`
		RTTVariance      *msField `json:"rtt_variance"`
		PTOCount         *uint64  `json:"pto_count"`
		CongestionWindow *uint64  `json:"congestion_window"`
		BytesInFlight    *uint64  `json:"bytes_in_flight"`
		SSThresh         *uint64  `json:"ssthresh"`
		PacketsInFlight  *uint64  `json:"packets_in_flight"`
		PacingRate       *uint64  `json:"pacing_rate"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*ev = MetricsUpdated{}
	dur := func(bit MetricFields, dst *time.Duration, m *msField) {
		if m != nil {
			ev.Fields |= bit
			*dst = m.d
		}
	}
	num := func(bit MetricFields, dst *uint64, v *uint64) {
		if v != nil {
			ev.Fields |= bit
			*dst = *v
		}
	}
	dur(MetricMinRTT, &ev.MinRTT, aux.MinRTT)
	dur(MetricSmoothedRTT, &ev.SmoothedRTT, aux.SmoothedRTT)
	dur(MetricLatestRTT, &ev.LatestRTT, aux.LatestRTT)
	dur(MetricRTTVariance, &ev.RTTVariance, aux.RTTVariance)
	num(MetricPTOCount, &ev.PTOCount, aux.PTOCount)
	num(MetricCongestionWindow, &ev.CongestionWindow, aux.CongestionWindow)
	num(MetricBytesInFlight, &ev.BytesInFlight, aux.BytesInFlight)
	num(MetricSSThresh, &ev.SSThresh, aux.SSThresh)
	num(MetricPacketsInFlight, &ev.PacketsInFlight, aux.PacketsInFlight)
	num(MetricPacingRate, &ev.PacingRate, aux.PacingRate)
	return nil
}

// Congestion controller states, as qvis colours them.
const (
	CongestionSlowStart          = "slow_start"
	CongestionAvoidance          = "congestion_avoidance"
	CongestionApplicationLimited = "application_limited"
	CongestionRecovery           = "recovery"
)

// CongestionStateUpdated is logged when the congestion controller changes
// state.
type CongestionStateUpdated struct {
	Old     string `json:"old"`
	New     string `json:"new"`
	Trigger string `json:"trigger"`
}

// Name returns NameCongestionStateUpdated.
func (CongestionStateUpdated) Name() string { return NameCongestionStateUpdated }

// AppendData appends the event data.
func (ev CongestionStateUpdated) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.optStr("old", ev.Old)
	e.str("new", ev.New)
	e.optStr("trigger", ev.Trigger)
	e.close()
	return e.b
}

// Packet number spaces.
const (
	SpaceInitial         = "initial"
	SpaceHandshake       = "handshake"
	SpaceApplicationData = "application_data"
)

// Loss timer event types.
const (
	TimerSet       = "set"
	TimerExpired   = "expired"
	TimerCancelled = "cancelled"
)

// LossTimerUpdated is logged when the loss detection timer is set, expires
// or is cancelled.
type LossTimerUpdated struct {
	// EventType is TimerSet, TimerExpired or TimerCancelled.
	EventType string `json:"event_type"`
	// TimerType is "ack" (time-threshold loss) or "pto".
	TimerType         string `json:"timer_type"`
	PacketNumberSpace string `json:"packet_number_space"`
	// Delta is the time until expiry; written only for TimerSet.
	Delta time.Duration `json:"-"`
}

// Name returns NameLossTimerUpdated.
func (LossTimerUpdated) Name() string { return NameLossTimerUpdated }

// AppendData appends the event data.
func (ev LossTimerUpdated) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.str("event_type", ev.EventType)
	e.optStr("timer_type", ev.TimerType)
	e.optStr("packet_number_space", ev.PacketNumberSpace)
	if ev.EventType == TimerSet {
		e.ms("delta", ev.Delta)
	}
	e.close()
	return e.b
}

// UnmarshalJSON decodes delta from float milliseconds.
func (ev *LossTimerUpdated) UnmarshalJSON(b []byte) error {
	type plain LossTimerUpdated
	aux := struct {
		*plain
		Delta msField `json:"delta"`
	}{plain: (*plain)(ev)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	setMs(&ev.Delta, aux.Delta)
	return nil
}

// PacketLost is logged when loss detection declares a packet lost.
type PacketLost struct {
	Header PacketHeader `json:"header"`
	// Frames are the frames the packet carried, when still known.
	Frames []FrameInfo `json:"frames"`
	// Trigger is "reordering_threshold", "time_threshold" or "pto_expired".
	Trigger string `json:"trigger"`
}

// Name returns NamePacketLost.
func (PacketLost) Name() string { return NamePacketLost }

// AppendData appends the event data.
func (ev PacketLost) AppendData(b []byte) []byte {
	e := enc{b: b}
	e.open()
	e.header("header", &ev.Header)
	if ev.Frames != nil {
		e.frames("frames", ev.Frames)
	}
	e.optStr("trigger", ev.Trigger)
	e.close()
	return e.b
}
