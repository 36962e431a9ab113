//go:build !(linux || darwin)

package main

import "os"

// terminalWidth is unknown here: the progress line assumes 80 columns.
func terminalWidth(*os.File) int { return 0 }
