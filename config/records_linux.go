package config

import "syscall"

// Filesystems that hold no files of their own: mkdir and create fail on
// them even for root, which access(2) does not tell.
var pseudoFS = map[int64]string{
	0x9fa0:     "procfs",
	0x62656572: "sysfs",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0x1cd1:     "devpts",
	0x64626720: "debugfs",
	0x73636673: "securityfs",
}

// dirNotWritable says why serve could not create entries in dir, "" when
// it can: access(2) for write and search (it also reports a read-only
// filesystem), and the pseudo filesystems where nothing can be created.
func dirNotWritable(dir string) string {
	if err := syscall.Access(dir, 0x2|0x1); err != nil { // W_OK|X_OK
		return "is not writable: " + err.Error()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		if name, ok := pseudoFS[int64(st.Type)]; ok {
			return "is on " + name + ", where no file can be created"
		}
	}
	return ""
}
