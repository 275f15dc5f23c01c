//go:build ignore

// favicon_gen draws favicon.ico: a 32×32 rounded square in the accent colour with a
// white waveform. Run it from this directory: go run favicon_gen.go
package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"log"
	"os"
)

const size = 32

// inside reports whether the point (x, y) is on the icon: the rounded square, and
// whether it is on one of the waveform's bars.
func inside(x, y float64) (square, bar bool) {
	const r = 7.0
	cx, cy := clamp(x, r, size-r), clamp(y, r, size-r)
	square = (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
	heights := []float64{8, 16, 22, 14, 6}
	for i, h := range heights {
		left := 6.5 + float64(i)*4
		if x >= left && x < left+3 && y >= (size-h)/2 && y < (size+h)/2 {
			bar = true
		}
	}
	return square, bar
}

func clamp(v, lo, hi float64) float64 { return max(lo, min(hi, v)) }

func main() {
	accent := color.NRGBA{0x4f, 0x6b, 0xed, 0xff}
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	const ss = 4 // samples per pixel side, for smooth edges
	for py := 0; py < size; py++ {
		for px := 0; px < size; px++ {
			var onSquare, onBar int
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					sq, b := inside(float64(px)+(float64(sx)+0.5)/ss, float64(py)+(float64(sy)+0.5)/ss)
					if sq {
						onSquare++
						if b {
							onBar++
						}
					}
				}
			}
			if onSquare == 0 {
				continue
			}
			f := float64(onBar) / float64(onSquare)
			mix := func(a uint8) uint8 { return uint8(float64(a)*(1-f) + 255*f + 0.5) }
			img.SetNRGBA(px, py, color.NRGBA{mix(accent.R), mix(accent.G), mix(accent.B), uint8(255 * onSquare / (ss * ss))})
		}
	}
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		log.Fatal(err)
	}
	// An ICO holding one PNG image: the header, one directory entry, the image.
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, []uint16{0, 1, 1})
	out.Write([]byte{size, size, 0, 0})
	binary.Write(&out, binary.LittleEndian, []uint16{1, 32})
	binary.Write(&out, binary.LittleEndian, []uint32{uint32(pngBuf.Len()), 6 + 16})
	out.Write(pngBuf.Bytes())
	if err := os.WriteFile("favicon.ico", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
