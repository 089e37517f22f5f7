package streams

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRangeSetAddRemove(t *testing.T) {
	type op struct {
		add        bool
		start, end uint64
	}
	tests := []struct {
		name string
		ops  []op
		want rangeSet
	}{
		{"empty add", []op{{true, 5, 5}}, nil},
		{"append", []op{{true, 0, 10}, {true, 20, 30}}, rangeSet{{0, 10}, {20, 30}}},
		{"adjacent merge", []op{{true, 0, 10}, {true, 10, 20}}, rangeSet{{0, 20}}},
		{"insert front", []op{{true, 20, 30}, {true, 0, 10}}, rangeSet{{0, 10}, {20, 30}}},
		{"insert middle", []op{{true, 0, 10}, {true, 40, 50}, {true, 20, 30}}, rangeSet{{0, 10}, {20, 30}, {40, 50}}},
		{"bridge", []op{{true, 0, 10}, {true, 20, 30}, {true, 40, 50}, {true, 5, 45}}, rangeSet{{0, 50}}},
		{"contained", []op{{true, 0, 100}, {true, 10, 20}}, rangeSet{{0, 100}}},
		{"remove split", []op{{true, 0, 100}, {false, 10, 20}}, rangeSet{{0, 10}, {20, 100}}},
		{"remove head", []op{{true, 0, 100}, {false, 0, 20}}, rangeSet{{20, 100}}},
		{"remove tail", []op{{true, 0, 100}, {false, 50, 200}}, rangeSet{{0, 50}}},
		{"remove across", []op{{true, 0, 10}, {true, 20, 30}, {true, 40, 50}, {false, 5, 45}}, rangeSet{{0, 5}, {45, 50}}},
		{"remove all", []op{{true, 0, 10}, {true, 20, 30}, {false, 0, 30}}, rangeSet{}},
		{"remove gap", []op{{true, 0, 10}, {true, 20, 30}, {false, 10, 20}}, rangeSet{{0, 10}, {20, 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s rangeSet
			for _, o := range tt.ops {
				if o.add {
					s.add(o.start, o.end)
				} else {
					s.remove(o.start, o.end)
				}
			}
			if !(len(s) == 0 && len(tt.want) == 0) && !slices.Equal(s, tt.want) {
				t.Errorf("got %v, want %v", s, tt.want)
			}
		})
	}
}

// TestRangeSetModel checks random adds and removes against a bitmap.
func TestRangeSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const size = 200
	for iter := 0; iter < 200; iter++ {
		var s rangeSet
		var model [size]bool
		for step := 0; step < 50; step++ {
			a := rng.Uint64N(size)
			b := a + rng.Uint64N(size-a+1)
			add := rng.IntN(3) != 0
			if add {
				s.add(a, b)
			} else {
				s.remove(a, b)
			}
			for i := a; i < b; i++ {
				model[i] = add
			}
			// Rebuild the expected spans from the model.
			var want rangeSet
			for i := uint64(0); i < size; i++ {
				if !model[i] {
					continue
				}
				if n := len(want); n > 0 && want[n-1].end == i {
					want[n-1].end++
				} else {
					want = append(want, span{i, i + 1})
				}
			}
			if !slices.Equal(s, want) {
				t.Fatalf("iter %d step %d: got %v, want %v", iter, step, s, want)
			}
			x := rng.Uint64N(size)
			y := x + rng.Uint64N(size-x+1)
			all := true
			for i := x; i < y; i++ {
				all = all && model[i]
			}
			if got := s.contains(x, y); got != all {
				t.Fatalf("contains(%d,%d) = %v, want %v in %v", x, y, got, all, s)
			}
		}
	}
}
