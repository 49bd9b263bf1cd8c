// hello is the binary the image tests package.
package main

import "fmt"

func main() { fmt.Println("hello from an image") }
