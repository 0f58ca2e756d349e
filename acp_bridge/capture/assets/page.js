(function(){
'use strict';
// The rows come as JSON blocks in an exported page, or from the inspector's API in the live
// page (live.js feeds them through window.acpPage); see html_rows.py for the keys. Only the
// rows on screen are in the DOM: each row has a height (measured once drawn, estimated
// before), `tops` holds where each visible row starts, and a scroll draws the slice in view.
var rows=[], info={}, marks=[];  // marks: [seq, level, code, text]
var N=0, H=22, OVER=600, cap=0;
var list=document.getElementById('list'), box=document.getElementById('q'), count=document.getElementById('count');
var dirBox=document.getElementById('dir');
var resp, became={}, members={}, msgRows=[], total=0, pend=-1;
var open, timing, hgt, shown, days;  // days: how many midnights before the row (its clock wrapped)
var sel=-1, paneOpen=false, loader=null, kept={row:-1,n:0,records:null};  // the detail pane's state
function grow(n){  // the per-row arrays, room for n rows (doubling, so appends stay cheap)
  if(n<=cap)return;
  var c=Math.max(1024,cap*2,n), r2=new Int32Array(c).fill(-1), o2=new Uint8Array(c), t2=new Uint8Array(c),
      h2=new Float32Array(c), s2=new Uint8Array(c).fill(1), d2=new Uint16Array(c);
  if(cap){r2.set(resp);o2.set(open);t2.set(timing);h2.set(hgt);s2.set(shown);d2.set(days);}
  resp=r2;open=o2;timing=t2;hgt=h2;shown=s2;days=d2;cap=c;
}
grow(0);
function add(r){  // a row at the end: the links and counts it brings
  var i=N++; grow(N); rows[i]=r;
  if(r.h){members[i]=[];return;}
  var last=msgRows.length?msgRows[msgRows.length-1]:-1;
  days[i]=last<0?0:days[last]+(wrapped(rows[last].t,r.t)?1:0);
  msgRows.push(i); total+=r.n||1;
  if(members[r.g])members[r.g].push(i);
  if(r.q!==undefined)resp[r.q]=i;
  if(r.f!==undefined)(became[r.f]=became[r.f]||[]).push(i);
  var v=r.v; if(v==='emit'||v==='error'||((v==='rewrite'||v==='drop')&&'o' in r))open[i]=1;
}
function drop(){  // the last row taken back (a run of chunks still being folded, sent again grown)
  var i=--N, r=rows[i]; rows.length=N;
  open[i]=timing[i]=hgt[i]=0; shown[i]=1; if(low)low[i]=undefined;
  if(r.h){delete members[i];return;}
  msgRows.pop(); total-=r.n||1;
  if(members[r.g])members[r.g].pop();
  if(r.q!==undefined)resp[r.q]=-1;
  if(r.f!==undefined&&became[r.f])became[r.f].pop();
}
var vis=new Int32Array(0), tops=new Float64Array(1), low=null, shownCount={};

function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function secs(x){return x<1?(x*1000).toFixed(1)+' ms':x.toFixed(2)+' s';}
// A row's time is its local HH:MM:SS.mmm; the date is counted from the capture's start, a day
// more each time the clock goes from the afternoon back to the morning (midnight passed).
function wrapped(a,b){return typeof a==='string'&&typeof b==='string'&&a>='12'&&b<'12'&&a.charAt(2)===':'&&b.charAt(2)===':';}
function dayOf(i){  // the row's local date (a Date at its midnight), or null when the start is unknown
  var s=new Date(String(info.started)); if(isNaN(s.getTime())||typeof rows[i].t!=='string')return null;
  var first=rows[msgRows[0]], d=days[i]+(wrapped(clock(s),first.t)?1:0);
  return new Date(s.getFullYear(),s.getMonth(),s.getDate()+d);
}
function when(i,full){  // the row's time: the date in front where it changes (or `full`), the ISO UTC time as tooltip
  var r=rows[i], t=esc(r.t), day=dayOf(i), m=/^(\d\d):(\d\d):(\d\d)\.(\d{3})$/.exec(r.t);
  if(!day||!m)return '<span class="t">'+t+'</span>';
  var at=new Date(day.getFullYear(),day.getMonth(),day.getDate(),+m[1],+m[2],+m[3],+m[4]);
  if(full)return '<span class="t" title="'+at.toISOString()+'">'+ymd(at)+' '+t+'</span>';
  var k=msgRows.length&&i!==msgRows[0]?prevMsg(i):-1, changed=k>=0&&days[k]!==days[i];
  return '<span class="t" title="'+at.toISOString()+'">'+(changed?'<span class="day">'+ymd(at)+'</span>':'')+t+'</span>';
}
function ymd(d){return d.getFullYear()+'-'+pad(d.getMonth()+1)+'-'+pad(d.getDate());}
function prevMsg(i){for(var j=i-1;j>=0;j--)if(!rows[j].h)return j;return -1;}
// One way to write a time everywhere: local HH:MM:SS.mmm (the rows' own, as `show` prints
// them), the date in front where a day is named, and the ISO time in UTC as the tooltip.
function pad(n,w){n=String(n);while(n.length<(w||2))n='0'+n;return n;}
function clock(d){return pad(d.getHours())+':'+pad(d.getMinutes())+':'+pad(d.getSeconds())+'.'+pad(d.getMilliseconds(),3);}
function iso(t){var d=new Date(t*1000);return isNaN(d.getTime())?'':d.toISOString();}
function stamp(when){  // epoch seconds or an ISO text: the date and time, local, with the UTC tooltip
  var d=typeof when==='number'?new Date(when*1000):new Date(String(when));
  if(when===null||when===undefined||when===''||isNaN(d.getTime()))return esc(when===undefined||when===null?'':when);
  return '<span class="ts" title="'+d.toISOString()+'">'+ymd(d)+' '+clock(d)+'</span>';
}

// JSON indented by walking its text: numbers stay exactly as written (JSON.parse would round
// a 100-digit one); a line that is not JSON, or was cut, is indented as far as it goes. The
// padding stops growing at DEEP levels: a line nested 9,000 deep made 160 million characters.
var DEEP=32;
function indent(t){
  var c0=t.charAt(0); if(c0!=='{'&&c0!=='[')return t;
  var out=[], d=0, ins=false, pad=function(){return '\n'+'  '.repeat(Math.min(d,DEEP));};
  for(var k=0;k<t.length;k++){
    var c=t[k];
    if(ins){out.push(c); if(c==='\\'){out.push(t[++k]||'');} else if(c==='"')ins=false; continue;}
    if(c==='"'){ins=true;out.push(c);}
    else if(c==='{'||c==='['){var e=t[k+1]; if(e==='}'||e===']'){out.push(c,e);k++;} else {d++;out.push(c,pad());}}
    else if(c==='}'||c===']'){d=Math.max(0,d-1);out.push(pad(),c);}
    else if(c===','){out.push(c,pad());}
    else if(c===':'){out.push(': ');}
    else if(c!==' '&&c!=='\t')out.push(c);
  }
  return out.join('');
}

// Which lines of a and b are kept, by their longest common subsequence (a set difference
// past 250,000 line pairs, to stay fast).
function diff(a,b){
  var n=a.length,m=b.length,ka=new Uint8Array(n),kb=new Uint8Array(m),x,y;
  if(n*m>250000){
    var sa={},sb={}; a.forEach(function(l){sa[l]=1;}); b.forEach(function(l){sb[l]=1;});
    for(x=0;x<n;x++)ka[x]=sb[a[x]]?1:0; for(y=0;y<m;y++)kb[y]=sa[b[y]]?1:0; return [ka,kb];
  }
  var L=new Array(n+1); for(x=0;x<=n;x++)L[x]=new Uint16Array(m+1);
  for(x=n-1;x>=0;x--)for(y=m-1;y>=0;y--)L[x][y]=a[x]===b[y]?L[x+1][y+1]+1:Math.max(L[x+1][y],L[x][y+1]);
  x=0;y=0;
  while(x<n&&y<m){if(a[x]===b[y]){ka[x]=kb[y]=1;x++;y++;}else if(L[x+1][y]>=L[x][y+1])x++;else y++;}
  return [ka,kb];
}
function marked(lines,keep,cls){
  return lines.map(function(l,k){return keep[k]?esc(l):'<span class="'+cls+'">'+esc(l)+'</span>';}).join('\n');
}

// The message as a tree: objects and arrays fold (the first two levels open). Built from
// JSON.parse, which rounds a number past 2^53: the text below it keeps every digit.
function tree(t){
  if(t.length>200000||(t.charAt(0)!=='{'&&t.charAt(0)!=='['))return '';
  var v; try{v=JSON.parse(t);}catch(e){return '';}
  var budget=2000;
  function node(key,x,depth){
    if(--budget<0||depth>64)return depth>64?'<div class="tl">…</div>':'';
    var k=key===null?'':'<span class="tk">'+esc(key)+'</span>: ';
    if(x===null||typeof x!=='object')return '<div class="tl">'+k+'<span class="tv '+(x===null?'null':typeof x)+'">'+esc(JSON.stringify(x))+'</span></div>';
    var arr=Array.isArray(x), keys=arr?x.map(function(_,i){return i;}):Object.keys(x);
    if(!keys.length)return '<div class="tl">'+k+(arr?'[]':'{}')+'</div>';
    return '<details'+(depth<2?' open':'')+'><summary>'+k+(arr?'['+keys.length+']':'{'+keys.length+'}')+'</summary>'+
      keys.map(function(j){return node(arr?String(j):j,x[j],depth+1);}).join('')+'</details>';
  }
  return node(null,v,0);
}
var X={c:12,b:50,a:88};
function lane(r){
  var from=r.d==='a'?'c':'a', dst=r.d==='a'?'a':'c', segs;
  if(r.v==='emit')segs=[['emit','b',dst,'head']];
  else if(r.v==='drop')segs=[['in',from,'b','cross']];
  else if(r.v==='rewrite')segs=[['in',from,'b',''],['rewrite','b',dst,'head']];
  else segs=[[r.k==='other'?'other':(r.v==='error'?'error':'pass'),from,dst,'head']];
  return '<span class="lane">'+segs.map(function(s){
    var a=X[s[1]],b=X[s[2]];
    return '<i class="seg '+s[0]+' '+(b>a?'r':'l')+' '+s[3]+'" style="left:'+Math.min(a,b)+'%;width:'+Math.abs(b-a)+'%"></i>';
  }).join('')+'</span>';
}
function jump(j,text){return '<a class="jump" data-go="'+j+'">'+esc(text)+'</a>';}
function seqOf(j){var r=rows[j];return 'seq '+r.s;}

function summaryLine(i){
  var r=rows[i], links='';
  if(r.q!==undefined)links+=' '+jump(r.q,'↩ '+seqOf(r.q)+' ('+rows[r.q].l+')');
  if(resp[i]>=0){var a=rows[resp[i]];links+=' '+jump(resp[i],'→ answered '+(a.lat!==undefined?'in '+secs(a.lat):seqOf(resp[i])));}
  if(r.f!==undefined)links+=' '+jump(r.f,(rows[r.f].v==='drop'?'in place of ':'on ')+seqOf(r.f));
  (became[i]||[]).forEach(function(j){links+=' '+jump(j,'became '+seqOf(j));});
  return '<div class="sum" data-i="'+i+'">'+when(i)+lane(r)+'<span class="what"><b>'+esc(r.l)+'</b>'+
    (r.ss?' <span class="sess">'+esc(r.ss)+'</span>':'')+' <span class="size">'+esc(r.z)+'</span>'+
    (r.mk||[]).map(function(m){return ' <span class="mark '+esc(r.v)+'">'+esc(m)+'</span>';}).join('')+
    (found[i]||[]).map(function(f){return ' <span class="fd '+esc(f[1])+'" title="'+esc(f[3])+'">'+esc(f[2])+'</span>';}).join('')+
    (r.p?' <span class="pv">'+esc(r.p)+'</span>':'')+links+'</span></div>';
}
function body(i){
  var r=rows[i], h;
  if(r.v==='emit'){
    h='<div class="one"><h4>sent by the bridge</h4><pre>'+esc(indent(r.o||''))+'</pre></div>';
  } else if('o' in r){
    var to=r.d==='c'?'client':'agent', frm=to==='client'?'agent':'client', a=indent(r.b).split('\n');
    if(r.o===null){
      h='<div class="ba"><div><h4>before (from the '+frm+')</h4><pre>'+esc(a.join('\n'))+'</pre></div><div><h4>after (to the '+to+
        ')</h4><pre class="after">(dropped: not forwarded)'+(became[i]||[]).map(function(j){return '\n'+jump(j,'became '+seqOf(j));}).join('')+'</pre></div></div>';
    } else {
      var b=indent(r.o).split('\n'), k=diff(a,b);
      h='<div class="ba"><div><h4>before (from the '+frm+')</h4><pre>'+marked(a,k[0],'del')+'</pre></div><div><h4>after (to the '+to+
        ')</h4><pre class="after">'+marked(b,k[1],'ins')+'</pre></div></div>';
    }
  } else if(r.n){
    h='<div class="one"><pre>'+esc(r.b)+'</pre></div>';
  } else {
    var t=tree(r.b);
    h='<div class="one">'+(t?'<div class="tree">'+t+'</div><h4>as it came</h4>':'')+'<pre class="raw">'+esc(indent(r.b))+'</pre></div>';
  }
  if(r.e)h+='<p class="err">'+esc(r.e)+'</p>';
  (found[i]||[]).forEach(function(f){h+='<p class="fd '+esc(f[1])+'">'+esc(f[1])+' '+esc(f[2])+': '+esc(f[3])+'</p>';});
  return h;
}

function heading(i){
  var r=rows[i], parts=[esc(r.ti)];
  if(r.h==='turn'){
    if(r.se!==null&&r.se!==undefined)parts.push('session '+esc(r.se));
    var q=rows[r.q]; if(q&&q.p)parts.push('“'+esc(q.p.length>80?q.p.slice(0,79)+'…':q.p)+'”');
    var a=resp[r.q];
    if(a>=0){parts.push(secs(rows[a].m-q.m)); if(rows[a].sr)parts.push(esc(rows[a].sr));} else parts.push('no response');
  }
  var all=0,m=members[i]; for(var k=0;k<m.length;k++)all+=rows[m[k]].n||1;
  var c=shownCount[i]; parts.push('<span class="cnt">'+(c===undefined||c===all?all+' messages':c+' of '+all+' messages')+'</span>');
  var h='<h2>'+parts.join(' · ')+(r.h==='turn'?' <button class="tm" data-t="'+i+'">timing</button>':'')+'</h2>';
  return h+(timing[i]?waterfall(i):'');
}

// A turn's timing: a bar per request (to its answer), tool call (to its last status), and
// run of chunks; a tick for anything else. Times from the capture's monotonic clock.
function waterfall(i){
  var m=members[i], t0=rows[m[0]].m, t1=t0, bars=[], tools={}, k, r, end;
  for(k=0;k<m.length;k++){r=rows[m[k]]; if(r.tc!==undefined&&r.st!==undefined)tools[r.tc]=Math.max(tools[r.tc]||0,r.m);}
  for(k=0;k<m.length;k++){
    r=rows[m[k]]; end=r.m;
    if(r.k==='request'&&resp[m[k]]>=0)end=rows[resp[m[k]]].m;
    else if(r.u==='tool_call'&&tools[r.tc]!==undefined)end=tools[r.tc];
    else if(r.m2!==undefined)end=r.m2;
    else if(r.k==='response'||r.u==='tool_call_update')continue;
    bars.push([m[k],r.m,end]); t1=Math.max(t1,end);
  }
  var span=Math.max(t1-t0,1e-6), out=['<div class="wf">'];
  bars.slice(0,300).forEach(function(b){
    var r=rows[b[0]], left=(b[1]-t0)/span*100, w=Math.max((b[2]-b[1])/span*100,0.3);
    out.push('<div class="wr"><span class="wl">'+jump(b[0],r.l+(r.p?' · '+r.p:''))+'</span><span class="wt"><i class="wb '+
      (r.k==='request'?'req':(r.u==='tool_call'?'tool':'note'))+'" style="left:'+left.toFixed(2)+'%;width:'+w.toFixed(2)+
      '%"></i></span><span class="wd">'+(b[2]>b[1]?secs(b[2]-b[1]):'')+'</span></div>');
  });
  if(bars.length>300)out.push('<p class="more">… '+(bars.length-300)+' more</p>');
  out.push('<p class="more">0 to '+secs(span)+'</p></div>');
  return out.join('');
}

function estimate(i){
  var r=rows[i];
  if(r.h)return timing[i]?60+22*Math.min(members[i].length,300):34;
  if(!open[i])return H;
  var lines=Math.min(((r.o||r.b||'').length/60|0)+4,24);
  return H+30+lines*17;
}
function layout(){
  tops=new Float64Array(vis.length+1);
  for(var k=0;k<vis.length;k++){var j=vis[k];tops[k+1]=tops[k]+(hgt[j]||estimate(j));}
  list.style.height=tops[vis.length]+'px';
}
function find(y){var lo=0,hi=vis.length;while(lo<hi){var mid=(lo+hi)>>1;if(tops[mid+1]<=y)lo=mid+1;else hi=mid;}return lo;}

var drawn=0;
function draw(){
  var base=list.getBoundingClientRect().top+window.scrollY, y=window.scrollY-base, end=tops[vis.length];
  // A filter that shrank the list leaves the window scrolled past its end until the browser
  // clamps it (after this step, in Chromium): the last screenful is drawn, where it will be.
  if(y>end)y=Math.max(0,end-window.innerHeight);
  var first=find(Math.max(0,y-OVER)), html=[], k;
  for(k=first;k<vis.length&&tops[k]<y+window.innerHeight+OVER;k++){
    var j=vis[k], r=rows[j];
    html.push(r.h?'<section class="row group '+r.h+'" data-i="'+j+'" style="top:'+tops[k]+'px">'+heading(j)+'</section>':
      '<div class="row msg '+esc(r.v)+(open[j]?' open':'')+'" id="m'+r.s+'" data-i="'+j+'"'+(j===sel?' aria-selected="true"':'')+
      ' style="top:'+tops[k]+'px">'+summaryLine(j)+(open[j]?body(j):'')+'</div>');
  }
  list.innerHTML=html.join('');
  drawn=k-first; shownFrom=first;
  settle();
  document.body.setAttribute('data-drawn',String(drawn));
}
var shownFrom=0;
function settle(){  // the drawn rows measured; those below a row that changed height move
  var moved=false;
  [].forEach.call(list.children,function(el){var j=+el.getAttribute('data-i'),h=el.offsetHeight;if(h&&Math.abs(h-(hgt[j]||estimate(j)))>0.5){hgt[j]=h;moved=true;}});
  if(moved){layout();var kk=shownFrom;[].forEach.call(list.children,function(el){el.style.top=tops[kk++]+'px';});}
}
list.addEventListener('toggle',settle,true);  // a branch of a tree opened or closed
var queued=false;
function redraw(){if(!queued){queued=true;requestAnimationFrame(function(){queued=false;draw();});}}

function text(j){var r=rows[j];return ((found[j]||[]).map(function(f){return f[1]+' '+f[2]+' '+f[3];}).join(' ')+' '+r.l+' '+(r.ss||'')+' '+(r.s||'')+' '+(r.p||'')+' '+(r.b||'')+' '+(r.o||'')+' '+(r.e||'')+' '+(r.mk||[]).join(' ')).toLowerCase();}
// The filter box: words anywhere in a message, and as `show` has them, method:M (the method,
// or its start), session:S, update:KIND, kind:K; the direction from its menu (or dir:-> / dir:<-).
function terms(){
  var f={words:[],method:[],session:[],update:[],kind:[],dir:dirBox?dirBox.value:''};
  box.value.split(/\s+/).filter(Boolean).forEach(function(w){
    var m=/^(method|session|update|kind|dir):(.*)$/i.exec(w);
    if(!m||!m[2]){f.words.push(w.toLowerCase());return;}
    var k=m[1].toLowerCase(), v=m[2];
    if(k==='dir')f.dir=(v==='->'||v==='a'||v==='to-agent')?'a':((v==='<-'||v==='c'||v==='to-client')?'c':f.dir);
    else f[k].push(v);
  });
  return f;
}
function methodOf(r){return r.l.split(' ')[0];}
function keep(j,f){
  var r=rows[j];
  if(f.dir&&r.d!==f.dir)return false;
  if(f.method.length&&!f.method.some(function(m){var me=methodOf(r);return me===m||(m.slice(-1)==='/'&&me.indexOf(m)===0);}))return false;
  if(f.session.length&&!f.session.some(function(x){return r.ss!==undefined&&(r.ss===x||String(r.ss).indexOf(x)>=0);}))return false;
  if(f.update.length&&f.update.indexOf(r.u)<0)return false;
  if(f.kind.length&&f.kind.indexOf(r.k)<0)return false;
  if(f.words.length){
    if(!low)low=[];
    var t=low[j]||(low[j]=text(j));
    for(var x=0;x<f.words.length;x++)if(t.indexOf(f.words[x])<0)return false;
  }
  return true;
}
function apply(){
  var f=terms(), n=0, k, j;
  shownCount={};
  for(k=0;k<msgRows.length;k++){
    j=msgRows[k];
    var ok=keep(j,f);
    shown[j]=ok?1:0;
    if(ok){var c=rows[j].n||1;n+=c;shownCount[rows[j].g]=(shownCount[rows[j].g]||0)+c;}
  }
  var out=[];
  for(j=0;j<N;j++){if(rows[j].h?shownCount[j]:shown[j])out.push(j);}
  vis=Int32Array.from(out);
  layout();
  count.textContent=n+' of '+total+' messages';
  document.body.setAttribute('data-visible',String(n));
  document.body.setAttribute('data-rows',String(N));
  draw();
}
var timer=0;
box.addEventListener('input',function(){clearTimeout(timer);timer=setTimeout(apply,120);});
if(dirBox)dirBox.addEventListener('change',apply);
window.addEventListener('scroll',redraw,{passive:true});
window.addEventListener('resize',redraw);

function at(j){var lo=0,hi=vis.length;while(lo<hi){var mid=(lo+hi)>>1;if(vis[mid]<j)lo=mid+1;else hi=mid;}return lo;}
function go(j){  // a link followed: the row shown in place, selected, and (a message) in the pane
  if(!shown[j]){box.value='';apply();}
  hgt[j]=0; layout();
  var base=list.getBoundingClientRect().top+window.scrollY;
  window.scrollTo(0,Math.max(0,base+tops[at(j)]-document.querySelector('header').offsetHeight-40));
  if(rows[j].h)draw(); else select(j,true);
  var el=list.querySelector('[data-i="'+j+'"]'); if(el){el.classList.add('flash');}
  document.body.setAttribute('data-at',String(rows[j].s||''));
}
function reveal(j){  // scroll just enough that row j is on screen, below the sticky header
  var base=list.getBoundingClientRect().top+window.scrollY, k=at(j), top=base+tops[k], bottom=base+tops[k+1];
  var head=document.querySelector('.heads').getBoundingClientRect().bottom;
  if(top-window.scrollY<head)window.scrollTo(0,Math.max(0,top-head));
  else if(bottom-window.scrollY>window.innerHeight)window.scrollTo(0,bottom-window.innerHeight);
}
function select(j,show){  // row j selected (and shown in the pane when `show` or the pane is open)
  sel=j; document.body.setAttribute('data-sel',String(j>=0?rows[j].s:''));
  if(show||paneOpen)openPane(); draw();
}
function step(by){  // the next (by=1) or previous (-1) message row on screen, from the selection
  if(!vis.length)return;
  var k=sel>=0?at(sel):(by>0?-1:vis.length);
  if(sel>=0&&vis[k]!==sel)k=by>0?k-1:k;  // the selection was filtered out: from where it would be
  for(k+=by;k>=0&&k<vis.length;k+=by)if(!rows[vis[k]].h){select(vis[k],false);reveal(vis[k]);draw();return;}
}
list.addEventListener('click',function(ev){
  var a=ev.target.closest('a.jump'); if(a){ev.preventDefault();go(+a.getAttribute('data-go'));return;}
  var b=ev.target.closest('button.tm'); if(b){var t=+b.getAttribute('data-t');timing[t]^=1;hgt[t]=0;layout();draw();return;}
  if(ev.target.closest('.tree'))return;
  var s=ev.target.closest('.sum'); if(s&&!window.getSelection().toString())select(+s.getAttribute('data-i'),true);
});

// -- the detail pane: the message selected, beside the list -----------------------------------
var pane=document.getElementById('pane');
function openPane(){
  if(sel<0||!pane)return;
  paneOpen=true; pane.hidden=false; document.body.classList.add('paned');
  pane.innerHTML=detail(sel); document.body.setAttribute('data-pane',String(rows[sel].s));
}
function closePane(){
  paneOpen=false; if(pane){pane.hidden=true;pane.innerHTML='';}
  document.body.classList.remove('paned'); document.body.removeAttribute('data-pane');
}
function whereTo(r){return r.d==='a'?'client → agent':'agent → client';}
function sent(r){return r.v==='emit'?(r.o||''):(r.o!==undefined&&r.o!==null?r.o:r.b);}
function detail(i){
  var r=rows[i], h=[], links=[];
  h.push('<div class="ph"><b>'+esc(r.l)+'</b><button class="x" data-act="close" title="close (Esc)">✕</button></div>');
  h.push('<p class="meta">seq '+esc(r.s)+(r.s2!==undefined?'–'+esc(r.s2):'')+' · '+when(i,true)+' · '+whereTo(r)+
    (r.v==='emit'?' (written by the bridge)':'')+' · '+esc(r.k)+' · '+esc(r.v)+' · '+esc(r.z)+(r.ss?' · session '+esc(r.ss):'')+'</p>');
  h.push('<p class="acts"><button data-act="json">copy JSON</button> <button data-act="raw">copy raw line</button>'+
    ' <button data-act="show">copy show command</button></p>');
  if(r.q!==undefined)links.push('request: '+jump(r.q,seqOf(r.q)+' '+rows[r.q].l));  // (a response's label has the latency)
  if(resp[i]>=0)links.push('response: '+jump(resp[i],seqOf(resp[i])+' '+rows[resp[i]].l));
  if(r.f!==undefined)links.push((rows[r.f].v==='drop'?'sent in place of ':'sent on ')+jump(r.f,seqOf(r.f)+' '+rows[r.f].l));
  (became[i]||[]).forEach(function(j){links.push('became '+jump(j,seqOf(j)+' '+rows[j].l));});
  if(links.length)h.push('<div class="pair">'+links.join('<br>')+'</div>');
  if(r.mk)h.push('<h4>what the rules did</h4><p>'+r.mk.map(function(m){return '<span class="mark '+esc(r.v)+'">'+esc(m)+'</span>';}).join(' ')+'</p>');
  if(r.v==='emit'||'o' in r)h.push(body(i).replace(/ style="[^"]*"/g,''));  // before and after, the change marked
  else if(r.e)h.push('<p class="err">'+esc(r.e)+'</p>');
  if(!r.mk&&!('o' in r))(found[i]||[]).forEach(function(f){h.push('<p class="fd '+esc(f[1])+'">'+esc(f[1])+' '+esc(f[2])+': '+esc(f[3])+'</p>');});
  if(r.n){h.push(folded(i));return h.join('');}
  var t=sent(r), tr=tree(t);
  h.push('<h4>JSON'+(r.o!==undefined&&r.o!==null&&r.v!=='emit'?' (as it went out)':'')+'</h4>'+(tr?'<div class="tree">'+tr+'</div>':'<p class="more">(not JSON)</p>'));
  h.push('<h4>raw line'+(r.o!==undefined&&r.v!=='emit'?' (as it came)':'')+'</h4><pre class="rawline">'+esc(r.v==='emit'?(r.o||''):r.b)+'</pre>');
  return h.join('');
}
// A run of chunks: its messages one by one when the page can fetch them (the live page's
// loader, from the messages API, when the pane opens it), else the joined text the row keeps.
var MEMBERS=2000;
function folded(i){
  var r=rows[i], h='<h4>'+r.n+' messages folded into this row</h4>';
  if(!loader)return h+'<p class="more">seq '+r.s+' to '+r.s2+': the exported page keeps their text joined; '+
    '`acp-bridge show` or the inspector lists each.</p><pre class="rawline">'+esc(r.b)+'</pre>';
  if(kept.row!==i||kept.n!==r.n){
    kept={row:i,n:r.n,records:null};
    loader(r.s,r.s2,Math.min(r.n,MEMBERS)).then(function(recs){
      if(kept.row===i&&kept.n===r.n){kept.records=recs;if(paneOpen&&sel===i)openPane();}
    },function(){if(kept.row===i){kept.records=[];kept.error=1;if(paneOpen&&sel===i)openPane();}});
  }
  if(!kept.records)return h+'<p class="more">loading…</p>';
  if(kept.error)return h+'<p class="err">could not load them</p><pre class="rawline">'+esc(r.b)+'</pre>';
  var out=[h,'<div class="members">'];
  kept.records.forEach(function(rec,k){
    var raw=typeof rec.raw==='string'?rec.raw.replace(/\r?\n$/,''):'', text='';
    try{text=JSON.parse(raw).params.update.content.text;}catch(e){} if(typeof text!=='string')text='';
    out.push('<div class="member" data-k="'+k+'"><span class="t"'+(typeof rec.time==='number'?' title="'+iso(rec.time)+'"':'')+'>'+
      (typeof rec.time==='number'?clock(new Date(rec.time*1000)):'')+'</span> <span class="sq">seq '+esc(rec.seq)+'</span> '+
      '<span class="pv">'+esc(text)+'</span><pre class="rawline" hidden>'+esc(raw||'(not text)')+'</pre></div>');
  });
  if(r.n>kept.records.length)out.push('<p class="more">… '+(r.n-kept.records.length)+' more</p>');
  out.push('</div>');
  return out.join('');
}
// A file name as one shell word. A control character goes as an escape in $'...': pasted raw,
// a Ctrl-U erases the line typed so far and a newline runs what follows, quotes or not.
function shellWord(name){
  if(/^[\w.\/-]+$/.test(name))return name;
  if(!/[\x00-\x1f\x7f-\x9f\u2028\u2029]/.test(name))return "'"+name.replace(/'/g,"'\\''")+"'";
  return "$'"+name.replace(/[\\'\x00-\x1f\x7f-\x9f\u2028\u2029]/g,function(c){
    var n=c.charCodeAt(0);
    return n<0x20||n===0x7f?'\\x'+pad(n.toString(16)):n>0x7f?'\\u'+pad(n.toString(16),4):'\\'+c;
  })+"'";
}
function showCommand(r){  // one message: itself (--seq); a folded run: its kind, in its direction
  var q=shellWord(String(info.title||'CAPTURE'));
  var seq=/^\d+$/.test(String(r.s))?String(r.s):'';  // a capture's own text never reaches the shell line
  if(seq&&!(r.n>1))return 'acp-bridge show '+q+' --seq '+seq+' --detail 3';
  var m=methodOf(r), c='acp-bridge show '+q+' --detail 3 --direction '+(r.d==='a'?'to-agent':'to-client');
  if(m&&/^[\w\/.-]+$/.test(m))c+=' --method '+m;
  if(r.u&&/^\w+$/.test(r.u))c+=' --update '+r.u;
  return seq?c+'   # from seq '+seq:c;
}
function copy(text){  // the clipboard, or (a file:// page may not have it) a selected text area
  document.body.setAttribute('data-copied',text);
  try{if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(text).catch(fallback);return;}}catch(e){}
  fallback();
  function fallback(){var ta=document.createElement('textarea');ta.value=text;document.body.appendChild(ta);ta.select();
    try{document.execCommand('copy');}catch(e){} ta.remove();}
}
if(pane)pane.addEventListener('click',function(ev){
  var a=ev.target.closest('a.jump'); if(a){ev.preventDefault();go(+a.getAttribute('data-go'));return;}
  var m=ev.target.closest('.member'); if(m&&!ev.target.closest('pre')){var p=m.querySelector('pre');p.hidden=!p.hidden;return;}
  var b=ev.target.closest('button[data-act]'); if(!b||sel<0)return;
  var r=rows[sel], act=b.getAttribute('data-act');
  if(act==='close'){closePane();draw();}
  else if(act==='json')copy(indent(sent(r)));
  else if(act==='raw')copy(r.v==='emit'?(r.o||''):r.b);
  else if(act==='show')copy(showCommand(r));
  if(act!=='close'){var label=b.textContent;b.textContent='copied';setTimeout(function(){b.textContent=label;},900);}
});
document.addEventListener('keydown',function(ev){
  var typing=/^(INPUT|SELECT|TEXTAREA)$/.test((ev.target&&ev.target.tagName)||'');
  if(ev.key==='Escape'){if(typing)ev.target.blur();else if(paneOpen){closePane();draw();}return;}
  if(typing||ev.altKey||ev.ctrlKey||ev.metaKey)return;
  if(ev.key==='/'){ev.preventDefault();box.focus();box.select();}
  else if(ev.key==='ArrowDown'||ev.key==='j'){ev.preventDefault();step(1);}
  else if(ev.key==='ArrowUp'||ev.key==='k'){ev.preventDefault();step(-1);}
  else if(ev.key==='Enter'&&sel>=0){ev.preventDefault();if(!rows[sel].h)openPane();}
});

var found={};  // row -> its findings
function seqRow(seq){var lo=0,hi=msgRows.length;while(lo<hi){var mid=(lo+hi)>>1;var r=rows[msgRows[mid]];if((r.s2||r.s)<seq)lo=mid+1;else hi=mid;}return lo<msgRows.length?msgRows[lo]:-1;}
function mark(){
  found={}; low=null;
  marks.forEach(function(f){var j=seqRow(f[0]);if(j>=0&&rows[j].s<=f[0])(found[j]=found[j]||[]).push(f);});
}
function meta(){
  document.getElementById('meta').innerHTML=esc(info.messages+' messages · '+info.turns+' turns · '+N+' rows · '+
    marks.length+' findings · bridge '+info.bridge)+' · started '+stamp(info.started);
}
function atBottom(){return window.innerHeight+window.scrollY>=document.body.scrollHeight-4;}
// The latency table of `stats` and the findings and verdict of `check` (either may be absent).
function side(stats,report){
  var el=document.getElementById('side'); if(!el||(!stats&&!report))return;
  var h=['<div><h3>latency</h3><table><tr><th>method</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>'];
  var lat=(stats&&stats.latency)||[];
  lat.forEach(function(l){
    h.push('<tr><td>'+esc(l.method)+'</td><td>'+l.count+'</td><td>'+secs(l.p50)+'</td><td>'+secs(l.p90)+'</td><td>'+secs(l.p99)+'</td><td>'+secs(l.max)+'</td></tr>');
  });
  if(!lat.length)h.push('<tr><td colspan="6">(no answered requests)</td></tr>');
  h.push('</table></div><div><h3>findings</h3><ul>');
  var fs=(report&&report.findings)||[];
  fs.forEach(function(f){h.push('<li class="fd-item"><b>'+esc(f.level)+'</b> '+esc(f.code)+' ('+f.count+'x): '+esc(f.meaning)+'</li>');});
  if(!fs.length)h.push('<li>'+(report?'no findings':'(not computed)')+'</li>');
  if(report)h.push('</ul><p class="verdict">verdict: '+esc(report.verdict)+'</p></div>'); else h.push('</ul></div>');
  el.innerHTML=h.join(''); el.hidden=false;
}
var api={
  // Rows from index `start` on, and the row still folding (or null): the live page's feed.
  feed:function(start,more,pending){
    var follow=N>0&&atBottom();
    if(pend>=0){drop();pend=-1;}
    if(start!==N)return false;  // not where this page is: the caller starts again
    more.forEach(add);
    if(pending){add(pending);pend=N-1;}
    mark(); apply(); meta();
    if(paneOpen&&sel>=N)closePane(); else if(paneOpen&&sel===pend)openPane();  // a run of chunks that grew
    if(follow)window.scrollTo(0,document.body.scrollHeight);
    return true;
  },
  reset:function(summary){
    rows=[];N=0;cap=0;grow(0);became={};members={};msgRows=[];total=0;pend=-1;found={};low=null;
    sel=-1;kept={row:-1,n:0,records:null};closePane();
    info=summary;marks=[];window.scrollTo(0,0);apply();meta();
  },
  marks:function(m){marks=m;mark();apply();meta();},
  summary:function(s){info=s;meta();},
  rows:function(){return N-(pend>=0?1:0);},
  loader:function(f){loader=f;},  // (start seq, end seq, how many) -> a promise of their records
  stamp:stamp,
  go:function(seq){var j=seqRow(seq);if(j>=0)go(j);},
  side:side
};
window.acpPage=api;
if(document.querySelector('script.live'))return;  // live.js feeds the page

[].forEach.call(document.querySelectorAll('script.rows'),function(s){
  var part=JSON.parse(s.textContent);
  for(var i=0;i<part.length;i++)add(part[i]);
});
info=JSON.parse(document.querySelector('script.summary').textContent)[0];
marks=JSON.parse(document.querySelector('script.findings').textContent);
var reps=document.querySelector('script.reports'); if(reps){reps=JSON.parse(reps.textContent);side(reps[0],reps[1]);}
mark(); meta();
var hash=location.hash, mq=/[#&]q=([^&]*)/.exec(hash);
if(mq){box.value=decodeURIComponent(mq[1].replace(/\+/g,' '));}
apply();
var mm=/[#&]m=(\d+)/.exec(hash); if(mm){var j0=seqRow(+mm[1]);if(j0>=0)go(j0);}
var mt=/[#&]timing=(\d+)/.exec(hash);
if(mt){for(var g=0,seen=0;g<N;g++){if(rows[g].h==='turn'&&++seen===+mt[1]){timing[g]=1;hgt[g]=0;layout();go(g);break;}}}
document.body.setAttribute('data-ready-ms',String(Math.round(performance.now())));
document.body.setAttribute('data-ready','1');
})();
