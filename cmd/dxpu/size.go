package main

import "github.com/dxpu/dxpu/internal/app/bytesize"

// parseSize reads a byte count flag (see internal/app/bytesize).
var parseSize = bytesize.Parse
