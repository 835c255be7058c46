package store

import (
	"context"
	"fmt"
	"time"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/voucher"
)

// Demo data: the shop types and Hangzhou shops of the well-known course dataset.
var demoTypes = []struct {
	name string
	sort int
}{
	{"美食", 1}, {"KTV", 2}, {"丽人·美发", 3}, {"健身运动", 10}, {"按摩·足疗", 5},
	{"美容SPA", 6}, {"亲子游乐", 7}, {"酒吧", 8}, {"轰趴馆", 9}, {"美睫·美甲", 4},
}

var demoShops = []struct {
	name, area, address, hours string
	typ                        int // index into demoTypes
	lng, lat                   float64
	avgPrice                   int64 // cents
	sold, comments, score      int
}{
	{"103茶餐厅", "大关", "金华路锦昌文华苑29号", "10:00-22:00", 0, 120.149192, 30.316078, 8000, 4215, 3035, 37},
	{"蔡馬洪涛烤肉·老北京铜锅涮羊肉", "拱宸桥/上塘", "上塘路1035号（中国工商银行旁）", "11:30-03:00", 0, 120.151505, 30.333422, 8500, 2160, 1460, 46},
	{"新白鹿餐厅(运河上街店)", "运河上街", "台州路2号运河上街购物中心F5", "10:30-21:00", 0, 120.151954, 30.32497, 6100, 12035, 8045, 47},
	{"Mamala(杭州远洋乐堤港店)", "拱宸桥/上塘", "丽水路66号远洋乐堤港商城2期1层B115号", "10:00-22:00", 0, 120.146659, 30.312742, 29000, 13519, 9529, 49},
	{"海底捞火锅(水晶城购物中心店)", "大关", "上塘路458号水晶城购物中心F6", "10:00-07:00", 0, 120.15778, 30.310633, 10400, 4125, 2764, 49},
	{"幸福里老北京涮锅（丝联店）", "拱宸桥/上塘", "金华南路189号丝联166号", "11:00-13:50,17:00-20:50", 0, 120.148603, 30.318618, 13000, 9531, 7324, 46},
	{"炉鱼(拱墅万达广场店)", "北部新城", "杭行路666号万达商业中心4幢2单元409室(铺位号4005)", "10:00-22:00", 0, 120.124691, 30.336819, 8500, 2631, 1320, 47},
	{"开乐迪KTV（运河上街店）", "运河上街", "台州路2号运河上街购物中心F4", "00:00-24:00", 1, 120.151801, 30.325031, 6700, 26891, 902, 37},
	{"INLOVE KTV(水晶城店)", "大关", "上塘路458号水晶城购物中心10层", "11:30-06:00", 1, 120.15853, 30.310002, 18000, 9326, 1034, 43},
	{"星聚会KTV(拱墅区万达店)", "北部新城", "杭行路666号万达广场B座4楼", "11:30-06:00", 1, 120.128958, 30.337252, 6000, 4306, 2213, 47},
}

// SeedDemo fills an empty database with demo shop types, shops, a normal voucher and a
// seckill voucher that is open from now for seven days with stock 100. It does nothing when
// shop types already exist, so restarts keep the data (and its orders) as they were.
func SeedDemo(ctx context.Context, db *ent.Client, now time.Time) (seeded bool, err error) {
	n, err := db.ShopType.Query().Count(ctx)
	if err != nil || n > 0 {
		return false, err
	}
	tx, err := db.Tx(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	types := make([]*ent.ShopType, len(demoTypes))
	for i, t := range demoTypes {
		if types[i], err = tx.ShopType.Create().SetName(t.name).SetSort(t.sort).Save(ctx); err != nil {
			return false, fmt.Errorf("seed shop type: %w", err)
		}
	}
	var first *ent.Shop
	for i, s := range demoShops {
		sh, err := tx.Shop.Create().SetName(s.name).SetTypeID(types[s.typ].ID).SetArea(s.area).
			SetAddress(s.address).SetOpenHours(s.hours).SetLongitude(s.lng).SetLatitude(s.lat).
			SetAvgPrice(s.avgPrice).SetSold(s.sold).SetComments(s.comments).SetScore(s.score).
			SetImages([]string{}).Save(ctx)
		if err != nil {
			return false, fmt.Errorf("seed shop: %w", err)
		}
		if i == 0 {
			first = sh
		}
	}
	if err = tx.Voucher.Create().SetShopID(first.ID).SetTitle("50元代金券").
		SetSubtitle("周一至周日均可使用").SetRules("全场通用\n无需预约\n可无限叠加").
		SetPayValue(4750).SetActualValue(5000).SetKind(voucher.KindNORMAL).Exec(ctx); err != nil {
		return false, fmt.Errorf("seed voucher: %w", err)
	}
	stock, begin, end := 100, now.Add(-time.Minute), now.Add(7*24*time.Hour)
	if err = tx.Voucher.Create().SetShopID(first.ID).SetTitle("100元代金券").
		SetSubtitle("限时秒杀，每人限购一张").SetRules("全场通用\n无需预约\n每人限购一张").
		SetPayValue(8000).SetActualValue(10000).SetKind(voucher.KindSECKILL).
		SetStock(stock).SetBeginAt(begin).SetEndAt(end).Exec(ctx); err != nil {
		return false, fmt.Errorf("seed seckill voucher: %w", err)
	}
	return true, tx.Commit()
}
