package parts

import (
	"errors"
	"fmt"
	"testing"
)

func TestTracker(t *testing.T) {
	var tr Tracker
	if n := tr.Sent("a"); n != 0 {
		t.Fatalf("Sent = %d", n)
	}
	tr.Mark("a", 2)
	if n := tr.Sent("a"); n != 2 {
		t.Errorf("Sent = %d, want 2", n)
	}
	tr.Done("a")
	if n := tr.Sent("a"); n != 0 {
		t.Errorf("after Done Sent = %d", n)
	}
	for i := range maxTracked + 10 {
		tr.Mark(fmt.Sprint(i), 1)
	}
	if len(tr.sent) > maxTracked {
		t.Errorf("tracker holds %d ids, bound is %d", len(tr.sent), maxTracked)
	}
	if tr.Sent(fmt.Sprint(maxTracked+9)) != 1 {
		t.Error("newest id forgotten")
	}
}

func TestSend(t *testing.T) {
	errDown := errors.New("platform down")
	tests := []struct {
		name     string
		start    int
		failAt   int // -1: none fails
		wantSent []int
		wantErr  error
		wantMark int
	}{
		{"all", 0, -1, []int{0, 1, 2}, nil, 3},
		{"after a stream showed the first", 1, -1, []int{1, 2}, nil, 3},
		{"stops at the failure", 0, 1, []int{0, 1}, errDown, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			var sent []int
			err := tr.Send("r", tt.start, 3, func(i int) error {
				sent = append(sent, i)
				if i == tt.failAt {
					return errDown
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Send = %v, want %v", err, tt.wantErr)
			}
			if fmt.Sprint(sent) != fmt.Sprint(tt.wantSent) {
				t.Errorf("sent pieces %v, want %v", sent, tt.wantSent)
			}
			if n := tr.Sent("r"); n != tt.wantMark {
				t.Errorf("Sent = %d after Send, want %d: a retry must start there", n, tt.wantMark)
			}
		})
	}
}
