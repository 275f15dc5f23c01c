package i18n

// Messages of a take's resource usage and of a batching host's batch on the GPU
// page (docs/gpu.md, "What a take records" and "The batch").
func init() {
	register(map[string]Message{
		"take.usage":             {EN: "Resources", ZH: "资源用量"},
		"take.usage.gpu":         {EN: "GPU", ZH: "GPU"},
		"take.usage.gpu_value":   {EN: "GPU %d · %s", ZH: "GPU %d · %s"},
		"take.usage.predicted":   {EN: "Memory admitted for (predicted)", ZH: "准入显存（预测）"},
		"take.usage.measured":    {EN: "Memory measured", ZH: "实测显存"},
		"take.usage.share":       {EN: "Line's share", ZH: "本句占用"},
		"take.usage.share_value": {EN: "%s (KV cache %s, activations %s)", ZH: "%s（KV 缓存 %s，激活 %s）"},
		"take.usage.queue":       {EN: "Queue", ZH: "排队"},
		"take.usage.queue_value": {EN: "%s (waiting for a permit %s, in the host %s, for s2mel %s)", ZH: "%s（等待许可 %s，主机内 %s，等待 s2mel %s）"},
		"take.usage.stages":      {EN: "GPT / s2mel / vocoder", ZH: "GPT / s2mel / 声码器"},
		"take.usage.batch":       {EN: "Batch", ZH: "批次"},
		"take.usage.batch_value": {EN: "%s rows per decode step on average · s2mel group of %d", ZH: "平均每步解码 %s 行 · s2mel 组内 %d 句"},

		"gpus.batch.decoding":           {EN: "Decoding", ZH: "解码中"},
		"gpus.batch.in_s2mel":           {EN: "In s2mel", ZH: "s2mel 中"},
		"gpus.batch.waiting":            {EN: "Waiting in the host", ZH: "主机内等待"},
		"gpus.batch.tokens":             {EN: "Decode rate", ZH: "解码速率"},
		"gpus.batch.kv":                 {EN: "KV cache in use", ZH: "KV 缓存已用"},
		"gpus.batch.memory":             {EN: "Memory per sequence: KV %s per token x %d beams x %s tokens per audio second = %s per audio second, activations %s per audio second; now %s of KV per decoding sequence", ZH: "每序列显存：每 token KV %s × %d 束 × 每秒音频 %s token = 每秒音频 %s，激活每秒音频 %s；当前每个解码序列 KV %s"},
		"gpus.batch.rows":               {EN: "At most %d rows in one decode step (%d beams per line) · %d steps", ZH: "单步最多 %d 行（每句 %d 束）· 共 %d 步"},
		"gpus.batch.graphs":             {EN: "Decode step as %d CUDA graphs (pool %s): %s%% of steps replayed one", ZH: "解码步录制为 %d 个 CUDA 图（内存池 %s）：%s%% 的步骤回放图"},
		"gpus.batch.attention_paged":    {EN: "Attention reads the KV cache in place", ZH: "注意力直接读取 KV 缓存"},
		"gpus.batch.attention_off":      {EN: "Attention copies each line's KV cache every step (slower, more memory): the in-place kernel failed its check at start: %s", ZH: "注意力每步复制各句的 KV 缓存（更慢、占用更多显存）：原位内核未通过启动检查：%s"},
		"gpus.batch.vocoder_fused":      {EN: "The vocoder's activations run as one kernel each", ZH: "声码器的激活各以单个内核运行"},
		"gpus.batch.vocoder_off":        {EN: "The vocoder's activations run in plain steps (slower), though one kernel each was asked for: %s", ZH: "声码器的激活以普通步骤运行（更慢），虽已要求单内核：%s"},
		"gpus.batch.decode.beam_search": {EN: "beam search", ZH: "束搜索"},
		"gpus.batch.decode.sample":      {EN: "one beam, sampled (top-k 30, top-p 0.8, temperature 0.8)", ZH: "单束采样（top-k 30、top-p 0.8、温度 0.8）"},
		"gpus.batch.decode.greedy":      {EN: "one beam, greedy", ZH: "单束贪心"},
		"gpus.batch.chart.sequences":    {EN: "Sequences", ZH: "序列数"},
		"gpus.batch.chart.tokens":       {EN: "Decode tokens/s", ZH: "解码 token/秒"},
		"gpus.batch.chart.kv":           {EN: "KV cache in use (GB)", ZH: "KV 缓存已用（GB）"},
	})
}
