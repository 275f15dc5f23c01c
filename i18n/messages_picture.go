package i18n

// Messages of the picture: the source video's proxy and the dub preview in sync.
func init() {
	register(map[string]Message{
		"video.none":           {EN: "No picture: upload the programme's video as the original performance to watch the dub against it.", ZH: "没有画面：将节目视频作为原始表演上传后，即可对照画面观看配音。"},
		"video.making":         {EN: "Making the picture for the browser…", ZH: "正在生成浏览器可播放的画面…"},
		"video.state.queued":   {EN: "Waiting", ZH: "等待中"},
		"video.state.running":  {EN: "Transcoding", ZH: "转码中"},
		"video.state.done":     {EN: "Ready", ZH: "就绪"},
		"video.state.failed":   {EN: "Failed", ZH: "失败"},
		"video.failed":         {EN: "The picture could not be made: %s", ZH: "画面生成失败：%s"},
		"video.not_video":      {EN: "This file has no picture: upload a video (MP4, MOV, MKV, WebM…).", ZH: "此文件没有画面：请上传视频（MP4、MOV、MKV、WebM 等）。"},
		"video.no_space":       {EN: "Not enough free space on the data disk to make the picture; free some and it is tried again.", ZH: "数据盘空间不足，无法生成画面；释放空间后将自动重试。"},
		"video.not_ready":      {EN: "The picture is not ready yet.", ZH: "画面尚未就绪。"},
		"video.info":           {EN: "%s · %s · %d×%d source", ZH: "%s · %s · 源 %d×%d"},
		"video.sound":          {EN: "Sound", ZH: "声音"},
		"video.sound_dub":      {EN: "Dub", ZH: "配音"},
		"video.sound_original": {EN: "Original", ZH: "原声"},
		"video.takes":          {EN: "Takes", ZH: "录音版本"},
		"video.takes_latest":   {EN: "Latest", ZH: "最新"},
		"video.takes_approved": {EN: "Approved only", ZH: "仅已通过"},
		"video.fill":           {EN: "Lines not rendered", ZH: "未合成的句子"},
		"video.fill_silence":   {EN: "Silence", ZH: "静音"},
		"video.fill_original":  {EN: "Original", ZH: "原声"},
		"video.syncing":        {EN: "Syncing…", ZH: "同步中…"},
		"video.synced":         {EN: "In sync", ZH: "已同步"},
		"video.mixing":         {EN: "Mixing the dub…", ZH: "正在混合配音…"},
		"video.mix_error":      {EN: "The dub could not be loaded.", ZH: "配音加载失败。"},
		"preview.too_long":     {EN: "The programme is %s s long; the preview plays at most %s s.", ZH: "节目长 %s 秒；预览最多播放 %s 秒。"},
	})
}
