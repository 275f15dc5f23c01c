package i18n

// Messages of the blob collector's figures (the workers page) and of the checks of
// reference voices.
func init() {
	register(map[string]Message{
		"blobgc.title":    {EN: "Unreferenced audio", ZH: "无引用的音频"},
		"blobgc.hint":     {EN: "Audio nothing refers to any more (replaced sources, deleted takes and voices) is removed once it is older than %s.", ZH: "不再被引用的音频（已替换的源音频、已删除的版本和声音）在超过 %s 后删除。"},
		"blobgc.never":    {EN: "The collector has not run yet.", ZH: "回收器尚未运行。"},
		"blobgc.last_run": {EN: "Last run", ZH: "上次运行"},
		"blobgc.removed":  {EN: "Removed", ZH: "已删除"},
		"blobgc.kept":     {EN: "Kept", ZH: "保留"},
		"blobgc.next_run": {EN: "Next run", ZH: "下次运行"},
		"blobgc.files":    {EN: "%d files, %s", ZH: "%d 个文件，%s"},
		"blobgc.missing":  {EN: "%d rows had lost their file already", ZH: "%d 条记录的文件早已丢失"},
		"blobgc.failed":   {EN: "The last run failed: %s", ZH: "上次运行失败：%s"},
		"voice.warnings":  {EN: "This voice may clone badly:", ZH: "此声音的克隆效果可能不佳："},
		"voice.clipped":   {EN: "%s%% of its samples are clipped at full scale: record it again at a lower level.", ZH: "%s%% 的采样在满幅处削波：请降低音量重新录制。"},
		"voice.noisy":     {EN: "Its noise floor is %s dBFS, the voice only %s dB above it: record it again in a quieter room, closer to the microphone.", ZH: "底噪为 %s dBFS，人声仅高出 %s dB：请在更安静的房间、靠近麦克风重新录制。"},
	})
}
