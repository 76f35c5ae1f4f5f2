package parts

import (
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
