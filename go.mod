module github.com/surgekit/surge

go 1.26
