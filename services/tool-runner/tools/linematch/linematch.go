// Package linematch finds a run of lines among a file's lines in linear
// time (Knuth–Morris–Pratt), for the edit tools' matching of old text:
// the window-by-window search took time proportional to the file's lines
// times the old text's, hours for a long old text of equal lines.
package linematch

// Index returns the first index at or after from where want occurs in
// lines, or -1. An empty want occurs at from.
func Index(lines, want []string, from int) int {
	at := -1
	scan(lines, want, from, func(i int) bool {
		at = i
		return false
	})
	return at
}

// Count returns how many runs of lines equal want, overlapping ones
// included, and the index of the first (-1 when none).
func Count(lines, want []string) (first, n int) {
	first = -1
	scan(lines, want, 0, func(i int) bool {
		if n == 0 {
			first = i
		}
		n++
		return true
	})
	return first, n
}

// scan calls found with the start of each occurrence of want in
// lines[from:] until it returns false.
func scan(lines, want []string, from int, found func(int) bool) {
	if from < 0 {
		from = 0
	}
	if len(want) == 0 {
		if from <= len(lines) {
			found(from)
		}
		return
	}
	// fail[i] is the length of the longest proper prefix of want[:i+1]
	// that is also its suffix.
	fail := make([]int, len(want))
	for i, k := 1, 0; i < len(want); i++ {
		for k > 0 && want[i] != want[k] {
			k = fail[k-1]
		}
		if want[i] == want[k] {
			k++
		}
		fail[i] = k
	}
	for i, k := from, 0; i < len(lines); i++ {
		for k > 0 && lines[i] != want[k] {
			k = fail[k-1]
		}
		if lines[i] == want[k] {
			k++
		}
		if k == len(want) {
			if !found(i - k + 1) {
				return
			}
			k = fail[k-1]
		}
	}
}
