package memtrim

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

func TestTickTrimsOnlyWhenQuiet(t *testing.T) {
	cfg := Config{IdleBytes: 100, AfterBusy: 2, IdleEvery: 3}
	tests := []struct {
		name   string
		allocs []uint64 // bytes allocated in each period
		want   []bool   // whether that period's tick trims
	}{
		{"busy never trims", []uint64{500, 500, 500}, []bool{false, false, false}},
		{"first quiet periods trim", []uint64{500, 0, 10, 0}, []bool{false, true, true, false}},
		{"then every third quiet period", []uint64{0, 0, 0, 0, 0, 0, 0, 0}, []bool{true, true, false, false, true, false, false, true}},
		{"activity starts over", []uint64{0, 0, 0, 1000, 0, 0, 0}, []bool{true, true, false, false, true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var total uint64
			trims := 0
			tr := newTrimmer(cfg, func() uint64 { return total }, func() { trims++ })
			for i, a := range tt.allocs {
				total += a
				before := trims
				got := tr.Tick()
				if got != tt.want[i] || (trims > before) != got {
					t.Fatalf("period %d (allocated %d): Tick = %v (trims %d→%d), want %v", i, a, got, before, trims, tt.want[i])
				}
			}
		})
	}
}

// TestTrimReturnsMemory drops a large heap and checks that one quiet tick
// gives its pages back to the operating system.
func TestTrimReturnsMemory(t *testing.T) {
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	tr := New(Config{IdleBytes: 1 << 20, AfterBusy: 1})
	garbage := make([][]byte, 64)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
		garbage[i][0] = 1
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	if tr.Tick() {
		t.Fatal("the period that allocated 64 MiB trimmed")
	}
	before := released()
	if !tr.Tick() {
		t.Fatal("a quiet period did not trim")
	}
	if got := released() - before; got < 32<<20 {
		t.Fatalf("trim released %d MiB, want at least 32 MiB of the 64 MiB dropped", got>>20)
	}
}
