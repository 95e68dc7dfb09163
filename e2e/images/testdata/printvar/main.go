// Command printvar prints a variable set at link time, to check GoBinary's -ldflags.
package main

import "fmt"

var value = "unset"

func main() { fmt.Println(value) }
