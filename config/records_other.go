//go:build !linux

package config

import "os"

// dirNotWritable says why serve could not create entries in dir, "" when
// it can or cannot tell: without access(2) only the permission bits of
// the owner are looked at.
func dirNotWritable(dir string) string {
	fi, err := os.Stat(dir)
	if err == nil && fi.Mode().Perm()&0o200 == 0 {
		return "is not writable"
	}
	return ""
}
