//go:build unix

package audit

import (
	"io/fs"
	"syscall"
)

// unlinked reports whether fi, from the Stat of an open file, says the file
// has no name left: removed while open, it is lost to every reader once
// closed, whereas a renamed one can still be read under its new name.
func unlinked(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
