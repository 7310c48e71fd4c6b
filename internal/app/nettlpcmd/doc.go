// Package nettlpcmd is `dxpu nettlp`: Serve runs a NetTLP-compatible DMA
// target over an emulated sparse host memory (what libtlp tools and
// devices behind a NetTLP adapter talk to), Read and Write are DMA
// requests made the way libtlp's dma_read and dma_write make them.
//
// Options arrive as the flags' text and are checked here; bad ones are
// apperr.ErrUsage, a failed transfer or serve is apperr.ErrFailed.
package nettlpcmd
