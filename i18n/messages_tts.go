package i18n

// Messages of the speech engines (package tts): what a user sees when a take fails.
func init() {
	register(map[string]Message{
		"tts.error.out_of_memory": {
			EN: "The GPU ran out of memory while speaking this line. It will be retried when memory is free.",
			ZH: "生成此台词时 GPU 显存不足，将在显存空闲后重试。",
		},
		"tts.error.invalid_input": {
			EN: "This line cannot be spoken as it is: check its text, speaker and emotion settings.",
			ZH: "此台词无法按当前内容生成语音：请检查文本、角色和情感设置。",
		},
		"tts.error.internal": {
			EN: "The speech engine failed on this line. It has been logged and will be retried.",
			ZH: "语音引擎处理此台词时出错，已记录并将重试。",
		},
		"tts.error.unavailable": {
			EN: "The speech engine is not running. It will be retried when it is back.",
			ZH: "语音引擎未运行，恢复后将重试。",
		},
		"tts.engine.espeak":    {EN: "Preview voice (espeak-ng, CPU)", ZH: "预览语音（espeak-ng，CPU）"},
		"tts.engine.indextts":  {EN: "IndexTTS (GPU)", ZH: "IndexTTS（GPU）"},
		"tts.engine.simulator": {EN: "Simulated engine (tests)", ZH: "模拟引擎（测试用）"},
		"tts.engine.vllm":      {EN: "IndexTTS on a vLLM server", ZH: "vLLM 服务器上的 IndexTTS"},
		"tts.engine.bench":     {EN: "Benchmark engine (random weights)", ZH: "基准测试引擎（随机权重）"},
	})
}
