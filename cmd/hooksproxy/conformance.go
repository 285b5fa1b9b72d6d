package main

import (
	"fmt"
	"io"
)

func conformance(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "hooksproxy conformance: not built yet")
	return 1
}
