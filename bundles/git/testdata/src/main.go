package main

func main() {
	println("pager", 1)
}
