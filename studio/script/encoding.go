package script

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// Encoding names, as the import reports them and accepts them from a user.
const (
	EncodingUTF8        = "utf-8"
	EncodingUTF16LE     = "utf-16le"
	EncodingUTF16BE     = "utf-16be"
	EncodingUTF32LE     = "utf-32le"
	EncodingUTF32BE     = "utf-32be"
	EncodingWindows1252 = "windows-1252"
	EncodingISO88591    = "iso-8859-1"
	EncodingISO885915   = "iso-8859-15"
	EncodingWindows1251 = "windows-1251"
	EncodingGB18030     = "gb18030"
	EncodingGBK         = "gbk"
	EncodingBig5        = "big5"
	EncodingShiftJIS    = "shift_jis"
	EncodingEUCKR       = "euc-kr"
)

// legacy maps the single- and multi-byte code pages to their golang.org/x/text decoders.
var legacy = map[string]encoding.Encoding{
	EncodingWindows1252: charmap.Windows1252,
	EncodingISO88591:    charmap.ISO8859_1,
	EncodingISO885915:   charmap.ISO8859_15,
	EncodingWindows1251: charmap.Windows1251,
	EncodingGB18030:     simplifiedchinese.GB18030,
	EncodingGBK:         simplifiedchinese.GBK,
	EncodingBig5:        traditionalchinese.Big5,
	EncodingShiftJIS:    japanese.ShiftJIS,
	EncodingEUCKR:       korean.EUCKR,
}

// Encodings lists the encodings an import accepts, in the order a form offers them.
func Encodings() []string {
	return []string{EncodingUTF8, EncodingUTF16LE, EncodingUTF16BE, EncodingUTF32LE, EncodingUTF32BE,
		EncodingWindows1252, EncodingISO88591, EncodingISO885915, EncodingWindows1251,
		EncodingGB18030, EncodingGBK, EncodingBig5, EncodingShiftJIS, EncodingEUCKR}
}

// KnownEncoding reports whether name is one of Encodings.
func KnownEncoding(name string) bool {
	for _, e := range Encodings() {
		if e == name {
			return true
		}
	}
	return false
}

// sniffUTF16 recognises UTF-16 without a byte-order mark by its NUL pattern: text
// that is mostly ASCII (timecodes, digits, arrows) has a NUL in every other byte. In
// the first 4 KiB, at least a fifth of the code units must have a NUL high byte and
// almost none (at most 1%) a NUL low byte. It returns the encoding or "".
func sniffUTF16(data []byte) string {
	n := min(len(data), 4096) &^ 1
	if n < 8 {
		return ""
	}
	var even, odd int
	for i := 0; i < n; i += 2 {
		if data[i] == 0 {
			even++
		}
		if data[i+1] == 0 {
			odd++
		}
	}
	units := n / 2
	switch {
	case odd*5 >= units && even*100 <= units:
		return EncodingUTF16LE
	case even*5 >= units && odd*100 <= units:
		return EncodingUTF16BE
	}
	return ""
}

// detectLegacy picks the code page of data, which is not valid UTF-8, by scoring the
// candidate decodings (no detector library is served by the module proxy; the HTML
// one in golang.org/x/net only tells UTF-8 from Windows-1252). The rule:
//
//   - If at least 90% of the non-ASCII sequences are valid UTF-8, the file is UTF-8
//     with a few broken bytes, and those are reported on their lines.
//   - Each CJK candidate (GB18030, Big5, Shift-JIS, EUC-KR) that decodes without an
//     invalid sequence scores the share of its non-ASCII characters that are
//     plausible text of that script: Hangul syllables for EUC-KR, kana or frequent
//     Han characters for Shift-JIS, frequent Han characters for GB18030 and Big5
//     (frequentHan lists the most frequent characters in both simplified and
//     traditional forms). Mis-decoded text gives rare characters and scores low.
//   - The best candidate scoring at least one half wins. Otherwise the file is
//     Windows-1251 if it reads as Russian there (cyrillicScore), else Windows-1252, the
//     superset of ISO-8859-1 Western files use. ISO-8859-15 cannot be told from
//     Windows-1252 by content: a user picks it.
func detectLegacy(data []byte) string {
	if mostlyUTF8(data) {
		return EncodingUTF8
	}
	best, bestScore := EncodingWindows1252, 0.5
	for _, name := range []string{EncodingGB18030, EncodingBig5, EncodingShiftJIS, EncodingEUCKR} {
		out, err := legacy[name].NewDecoder().Bytes(data)
		if err != nil || bytes.ContainsRune(out, utf8.RuneError) {
			continue
		}
		var plausible, total int
		for _, r := range string(out) {
			if r < 0x80 {
				continue
			}
			total++
			if plausibleRune(name, r) {
				plausible++
			}
		}
		if total == 0 {
			continue
		}
		if score := float64(plausible) / float64(total); score > bestScore {
			best, bestScore = name, score
		}
	}
	if best == EncodingWindows1252 && cyrillicScore(data) > 0.5 {
		return EncodingWindows1251
	}
	return best
}

// cyrillicScore is the share of the words of data, of two letters or more and with a
// non-ASCII letter, whose letters are all Cyrillic when data is read as Windows-1251.
// Every byte decodes there, and Western accented letters (0xC0-0xFF) decode to Cyrillic
// ones too, but a Western word has Latin letters around them ("Gr\xf6\xdfe" reads
// "Grцяe"), while a Russian word is Cyrillic throughout.
func cyrillicScore(data []byte) float64 {
	var words, pure int
	length, high := 0, 0
	end := func() {
		if length >= 2 && high > 0 {
			words++
			if high == length {
				pure++
			}
		}
		length, high = 0, 0
	}
	for _, b := range data {
		switch {
		case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z':
			length++
		case b >= 0x80:
			if r := charmap.Windows1251.DecodeByte(b); r >= 0x400 && r <= 0x4FF {
				length++
				high++
				continue
			}
			end()
		default:
			end()
		}
	}
	end()
	if words == 0 {
		return 0
	}
	return float64(pure) / float64(words)
}

// plausibleRune reports whether r is likely text when data is decoded as name.
func plausibleRune(name string, r rune) bool {
	punct := r >= 0x3000 && r <= 0x303F || r >= 0xFF01 && r <= 0xFF5E
	switch name {
	case EncodingEUCKR:
		return r >= 0xAC00 && r <= 0xD7A3 || punct
	case EncodingShiftJIS:
		return r >= 0x3040 && r <= 0x30FF || strings.ContainsRune(frequentHan, r) || punct
	}
	return strings.ContainsRune(frequentHan, r) || punct
}

// mostlyUTF8 reports whether at least 90% of the non-ASCII sequences of data are valid
// UTF-8 (and there is at least one valid one).
func mostlyUTF8(data []byte) bool {
	var valid, invalid int
	for len(data) > 0 {
		if data[0] < 0x80 {
			data = data[1:]
			continue
		}
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			invalid++
		} else {
			valid++
		}
		data = data[size:]
	}
	return valid > 0 && valid*10 >= (valid+invalid)*9
}

// frequentHan holds about 600 of the most frequent Chinese characters, in their
// simplified forms followed by the traditional forms of those that differ (from the
// usual character frequency lists of modern Chinese; Japanese kanji share most).
const frequentHan = "的一是不了人我在有他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穿艺背阵草脚概恶块顿敢守酒岛托央户烈洋哥索胡款靠评版宝座释景顾弟登货互付伯慢欧换闻危忙核暗姐介坏讨丽良序升监临亮露永呼味野架域沙掉括舰鱼杂误湾吉减编楚肯测败屋跑梦散温困剑渐封救贵枪缺楼县尚毫移娘朋画班智亦耳恩短掌恐遗固席松秘谢鲁遇康虑幸均销钟诗藏赶剧票损忽巨炮旧端探湖录叶春乡附吸予礼港雨呀板庭妇归睛饭额含顺输摇招婚脱补谓督毒油疗旅泽材灭逐莫笔亡鲜词圣择寻厂睡博勒烟授诺伦岸奥唐卖俄炸载洛健堂旁宫喝借君禁阴园谋宋避抓荣姑孙逃牙束跳顶玉镇雪午练迫爷篇肉嘴馆遍凡础洞卷坦牛宁纸诸训私庄祖丝翻暴森塔默握戏隐熟骨访弱蒙歌店鬼软典欲萨伙遭盘爸扩盖弄雄稳忘亿刺拥徒姆杨齐赛趣曲刀床迎冰虚玩析窗醒妻透购替塞努休虎扬途侵刑绿兄迅套贸毕唯谷轮库迹尤竞街促延震弃甲伟麻川申缓潜闪售灯针哲络抵朱埃抱鼓植纯夏忍页杰筑折郑贝尊吴秀混臣雅振染盛怒舞圆搞狂措姓残秋培迷诚宽宇猛摆梅毁伸摩盟末乃悲拍丁赵硬麦蒋操耶阻订彩抽赞魔纷沿喊违妹浪汇币丰蓝殊献桌啦瓦莱援译夺汽烧距裁偏符勇触课敬哭懂墙袭召罚侠厅拜巧侧韩冒债曼融惯享戴童犹乘挂奖绍厚纵障讯涉彻刊丈爆乌役描洗玛患妙镜唱烦签仙彼弗症仿倾牌陷鸟轰咱菜闭奋庆撤泪茶疾缘播朗杜奶季丹狗尾仪偷奔珠虫驻孔宜艾桥淡翼恨繁寒伴叹旦愈潮粮缩罢聚径恰挑袋灰捕徐珍幕映裂泰隔启尖忠累炎暂估泛荒偿横拒瑞忆孤鼻闹羊呆厉衡胞零穷舍码赫婆魂灾洪腿胆津俗辩胸晓劲贫仁偶辑邦恢赖圈摸仰润堆碰艇稍迟辆废净凶署壁御奉旋冬矿抬蛋晨伏吹鸡倍糊秦盾杯租骑乏隆诊奴摄丧污渡旗甘耐凭扎抢绪粗肩梁幻菲皆碎宙叔岩荡综爬荷悉蒂返井壮薄悄扫敏碍殖详迪矛霍允幅撒剩凯颗骂赏液番箱贴漫酸郎腰舒眉忧浮辛恋餐吓挺励辞艘键伍峰尺昨黎辈贯侦滑券崇扰宪绕趋慈乔阅汗枝拖墨胁插箭腊粉泥氏彭拔骗凤慧媒佩愤扑龄驱惜豪掩兼跃尸肃帕驶堡届欣惠册储飘桑闲惨洁踪勃宾频仇磨递邪撞拟滚奏巡颜剂绩贡疯坡瞧截燃焦殿伪柳锁逼颇昏劝呈搜勤戒驾漂饮曹朵仔柔俩孟腐幼践籍牧凉牲佳娜浓芳稿竹腹跌逻垂遵脉貌柏狱猜怜惑陶兽帐饰贷昌叙躺钢沟寄扶铺邓寿惧询汤盗肥尝匆辉奈扣廷澳嘛董迁凝慰厌脏腾幽怨鞋丢埋泉涌辖躲晋紫艰魏吾慌祝邮吐狠鉴曰械咬邻赤挤弯椅陪割揭韦悟聪雾锋梯猫祥阔誉筹丛牵鸣沈阁穆屈旨袖猎臂蛇贺柱抛鼠瑟戈牢逊迈欺吨琴衰瓶恼燕仲诱狼池疼卢仗冠粒遥吕玄尘冯抚浅敦纠钻晶岂峡苍喷耗凌敲菌赔涂粹扁亏寂煤熊恭湿循暖糖赋抑秩帽哀宿踏烂袁侯抖夹昆肝擦猪炼恒慎搬纽纹玻渔磁铜齿跨押怖漠疲叛遣兹祭醉拳弥斜档稀捷肤疫肿豆削岗晃吞宏癌肚隶履涨耀扭坛拨沃绘伐堪仆郭牺歼墓雇廉契拼惩捉覆刷劫嫌瓜歇雕闷乳串娃缴唤赢莲霸桃妥瘦搭赴岳嘉舱俊址庞耕锐缝悔邀玲惟斥宅添挖呵讼氧浩羽斤酷掠妖祸侍乙妨贪挣汪尿莉悬唇翰仓轨枚盐览傅帅庙芬屏寺胖璃愚滴疏萧姿颤丑劣柯寸扔盯辱匹俱辨饿蜂哦腔郁溃谨糟葛苗肠忌溜鸿爵鹏鹰笼丘桂滋聊挡纲肌茨壳痕碗穴膀卓贤卧膜毅锦欠哩函茫昂" +
	"這個們來為國說時會對過發後裡經麼學現當動麵還進樣理實從無與長機民開關點業將兩間問題體應戰頭見親陽聽給電氣邊區員條書東場處見號們壓係統傳聲報專師歡離讓論認識難顯變寫錢買賣講話"
