package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// FileChecker is implemented by a Registry that asks Parse to check the
// files the config names as serve will use them (MapRegistry.SetCheckFiles;
// validate does). Checking creates and changes nothing.
type FileChecker interface {
	ChecksFiles() bool
}

// checkRecordsFile reports a records.file that serve could not open:
// serve creates the missing directories (mkdir -p, 0700) and the file
// (0600) and appends to it, so the file, when it exists, must be
// writable, and otherwise its nearest existing ancestor must be a
// directory serve can create entries in.
func (p *parser) checkRecordsFile(cfg *Config, reg Registry) {
	fc, ok := reg.(FileChecker)
	if !ok || !fc.ChecksFiles() || cfg.Records.File == "" {
		return
	}
	if msg := recordsFileProblem(cfg.Records.File); msg != "" {
		p.add(p.lines["records.file"], "records.file", "%s", msg)
	}
}

func recordsFileProblem(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Sprintf("%s is a directory", path)
	case err == nil && fi.Mode().IsRegular():
		// Opening without O_CREATE or O_TRUNC changes nothing.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Sprintf("the record file cannot be opened for appending: %v", unwrapPath(err))
		}
		f.Close()
		return ""
	case err == nil:
		return "" // a device such as /dev/null: serve opens it as it is
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return fmt.Sprintf("the record file cannot be checked: %v", unwrapPath(err))
	}
	// The file does not exist: find the nearest existing ancestor.
	dir := filepath.Dir(filepath.Clean(path))
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Sprintf("the record directory cannot be created: %s is not a directory", dir)
			}
			if why := dirNotWritable(dir); why != "" {
				return fmt.Sprintf("the record directory cannot be created or written: %s %s", dir, why)
			}
			return ""
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Sprintf("the record directory cannot be checked: %v", unwrapPath(err))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Sprintf("the record directory cannot be created: %s does not exist", dir)
		}
		dir = parent
	}
}

// unwrapPath drops the *fs.PathError's operation, keeping path and cause.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
