package store

import (
	"encoding/json"
	"time"
)

// Verdicts as the store records them (Record.Verdict, Cell.Verdict): the
// strings of the conformance suite's verdicts, named here so that what
// reads the store (results, web) need not link the suite and the engine.
// observatory's tests check them against the suite's.
const (
	Pass         = "pass"
	Fail         = "fail"
	Warn         = "warn"
	Unsupported  = "unsupported"
	Inconclusive = "inconclusive"
	Errored      = "error"
	Observed     = "observed"
)

// Evidence is the part of a record's evidence (the suite's result as
// JSON) that a reader shows: title, tester error, checks with their
// requirement, packet events and measurements, and facts. Fields the
// suite adds later are ignored; observatory's tests check that a suite
// result decodes into it field for field.
type Evidence struct {
	Title  string          `json:"title"`
	Error  string          `json:"error,omitempty"`
	Checks []EvidenceCheck `json:"checks,omitempty"`
	Facts  []EvidenceFact  `json:"facts,omitempty"`
}

// EvidenceCheck is one check of a result.
type EvidenceCheck struct {
	Name         string               `json:"name"`
	Verdict      string               `json:"verdict"`
	Sentence     string               `json:"sentence"`
	Requirement  *EvidenceRequirement `json:"requirement,omitempty"`
	Events       []EvidenceEvent      `json:"events,omitempty"`
	Measurements map[string]float64   `json:"measurements,omitempty"`
}

// EvidenceRequirement is the requirement a check rests on.
type EvidenceRequirement struct {
	Doc     string `json:"doc"`
	Section string `json:"section"`
	Keyword string `json:"keyword"`
	Quote   string `json:"quote"`
}

// EvidenceEvent is one packet a check cites.
type EvidenceEvent struct {
	Time       time.Duration `json:"time_ns"`
	Direction  string        `json:"direction"`
	Role       string        `json:"role,omitempty"`
	PacketType string        `json:"packet_type"`
	Number     int64         `json:"packet_number"`
	Size       int           `json:"size"`
	Frames     []string      `json:"frames,omitempty"`
}

// EvidenceFact is one observed fact.
type EvidenceFact struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// DecodeEvidence decodes a record's evidence for display.
func DecodeEvidence(rec Record) (Evidence, error) {
	var e Evidence
	err := json.Unmarshal(rec.Evidence, &e)
	return e, err
}
